"""Build the configured traffic providers: the one place that maps `traffic.*.kind` to a class."""

from __future__ import annotations

from drctl.config.schema import FleetConfig, GatewayApiRegional, HAProxyGlobal, HAProxyRegional, Route53Global
from drctl.providers.base import GlobalTraffic, RegionalTraffic
from drctl.providers.gateway_api import GatewayApiRegionalTraffic
from drctl.providers.haproxy import HAProxyGlobalTraffic, HAProxyRegionalTraffic
from drctl.providers.route53 import Route53GlobalTraffic


def global_traffic(cfg: FleetConfig) -> GlobalTraffic:
    """The global tier provider (region weights) named by traffic.global.kind."""
    tier = cfg.traffic.global_tier
    if isinstance(tier, HAProxyGlobal):
        return HAProxyGlobalTraffic.from_config(cfg)
    if isinstance(tier, Route53Global):
        return Route53GlobalTraffic.from_config(cfg)
    raise ValueError(f"unsupported traffic.global.kind {tier.kind!r}")


def regional_traffic(cfg: FleetConfig) -> RegionalTraffic:
    """The regional tier provider (track weights) named by traffic.regional.kind."""
    tier = cfg.traffic.regional_tier
    if isinstance(tier, HAProxyRegional):
        return HAProxyRegionalTraffic.from_config(cfg)
    if isinstance(tier, GatewayApiRegional):
        return GatewayApiRegionalTraffic.from_config(cfg)
    raise ValueError(f"unsupported traffic.regional.kind {tier.kind!r}")
