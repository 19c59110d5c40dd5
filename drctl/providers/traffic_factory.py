"""Build the configured traffic providers: the one place that maps `traffic.*.kind` to a class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from drctl.config.schema import FleetConfig, GatewayApiRegional, HAProxyGlobal, HAProxyRegional, Route53Global
from drctl.providers.base import GlobalTraffic, RegionalTraffic
from drctl.providers.gateway_api import GatewayApiRegionalTraffic
from drctl.providers.haproxy import HAProxyGlobalTraffic, HAProxyRegionalTraffic
from drctl.providers.route53 import Route53GlobalTraffic

T = TypeVar("T")


def _build(cfg: FleetConfig, tier: Any, field: str, kinds: dict[type, Callable[[FleetConfig], T]]) -> T:
    for section, provider in kinds.items():
        if isinstance(tier, section):
            return provider(cfg)
    raise ValueError(f"unsupported {field} {tier.kind!r}")


def global_traffic(cfg: FleetConfig) -> GlobalTraffic:
    """The global tier provider (region weights) named by traffic.global.kind."""
    kinds: dict[type, Callable[[FleetConfig], GlobalTraffic]] = {
        HAProxyGlobal: HAProxyGlobalTraffic.from_config,
        Route53Global: Route53GlobalTraffic.from_config,
    }
    return _build(cfg, cfg.traffic.global_tier, "traffic.global.kind", kinds)


def regional_traffic(cfg: FleetConfig) -> RegionalTraffic:
    """The regional tier provider (track weights) named by traffic.regional.kind."""
    kinds: dict[type, Callable[[FleetConfig], RegionalTraffic]] = {
        HAProxyRegional: HAProxyRegionalTraffic.from_config,
        GatewayApiRegional: GatewayApiRegionalTraffic.from_config,
    }
    return _build(cfg, cfg.traffic.regional_tier, "traffic.regional.kind", kinds)
