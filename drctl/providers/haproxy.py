"""HAProxy traffic tiers: region weights in the global backend, track weights in each region gateway.

Both tiers move traffic only through `set weight` on fixed, named servers (never per replica), all
requested weights in one runtime API connection.
"""

from __future__ import annotations

from drctl.config.schema import TRACKS, FleetConfig, HAProxyGlobal, HAProxyRegional
from drctl.providers.base import AppliedWeights
from drctl.providers.haproxy_runtime import HAProxyError, HAProxyRuntime
from drctl.providers.weights import validate_weights

HAPROXY_MAX_WEIGHT = 256


class HAProxyGlobalTraffic:
    """Global tier: one server per region in the global backend, named by the region."""

    def __init__(self, runtime: HAProxyRuntime, backend: str, regions: list[str]) -> None:
        self.runtime = runtime
        self.backend = backend
        self.regions = list(regions)

    @classmethod
    def from_config(cls, cfg: FleetConfig) -> HAProxyGlobalTraffic:
        tier = cfg.traffic.global_tier
        if not isinstance(tier, HAProxyGlobal):
            raise ValueError(f"traffic.global.kind is {tier.kind!r}, not 'haproxy'")
        return cls(HAProxyRuntime(tier.runtime_socket), tier.backend, cfg.region_names)

    def get_weights(self) -> dict[str, int]:
        """Weights of the configured regions; raises HAProxyError if a region has no server."""
        found = self.runtime.get_weights(self.backend)
        missing = [r for r in self.regions if r not in found]
        if missing:
            raise HAProxyError(
                f"global backend {self.backend!r} at {self.runtime.socket_path} has no server for "
                f"region(s) {', '.join(missing)}"
            )
        return {r: found[r] for r in self.regions}

    def set_weights(self, weights: dict[str, int]) -> None:
        """Set region weights; regions left out keep theirs. All or nothing."""
        validate_weights(weights, self.regions, max_weight=HAPROXY_MAX_WEIGHT, what="region")
        if set(weights) != set(self.regions):
            validate_weights(
                weights,
                self.regions,
                max_weight=HAPROXY_MAX_WEIGHT,
                what="region",
                current=self.get_weights(),
            )
        self.runtime.set_weights(self.backend, weights)

    def apply_weights(self, weights: dict[str, int]) -> AppliedWeights:
        """`set weight` takes effect on the next request: applied and propagated in one step."""
        self.set_weights(weights)
        return AppliedWeights(change_id=None, propagated=True, status="applied")

    def is_propagated(self, change_id: str) -> bool:
        return True

    def data_plane_out(self) -> dict[str, str]:
        """Regions whose server in the global backend is not running: its health checks failed
        (fall count reached) or it is in maintenance. A weight of 0 is drctl's, not the data plane's."""
        out: dict[str, str] = {}
        for srv in self.runtime.servers(self.backend):
            if srv.name not in self.regions or srv.operational:
                continue
            why = "in maintenance" if srv.admin_maint else f"health checks {srv.check_result}"
            out[srv.name] = f"{why} (global backend {self.backend!r}, server {srv.name!r} not running)"
        return out


class HAProxyRegionalTraffic:
    """Regional tier: servers stable/canary/blue/green in each region gateway's track backend."""

    def __init__(self, runtimes: dict[str, HAProxyRuntime], backend: str) -> None:
        self.runtimes = dict(runtimes)
        self.backend = backend

    @classmethod
    def from_config(cls, cfg: FleetConfig) -> HAProxyRegionalTraffic:
        tier = cfg.traffic.regional_tier
        if not isinstance(tier, HAProxyRegional):
            raise ValueError(f"traffic.regional.kind is {tier.kind!r}, not 'haproxy'")
        runtimes = {}
        for r in cfg.regions:
            if not r.gateway_runtime_socket:  # config validation already demands it for this tier
                raise ValueError(f"region {r.name!r} has no gateway_runtime_socket")
            runtimes[r.name] = HAProxyRuntime(r.gateway_runtime_socket)
        return cls(runtimes, tier.backend)

    def _runtime(self, region: str) -> HAProxyRuntime:
        if region not in self.runtimes:
            raise ValueError(f"unknown region {region!r}; known: {', '.join(self.runtimes)}")
        return self.runtimes[region]

    def get_track_weights(self, region: str) -> dict[str, int]:
        """Weights of the tracks the gateway has (servers named after other things are ignored)."""
        found = self._runtime(region).get_weights(self.backend)
        return {t: found[t] for t in TRACKS if t in found}

    def set_track_weights(self, region: str, weights: dict[str, int]) -> None:
        """Set track weights in one region; tracks left out keep theirs. All or nothing."""
        runtime = self._runtime(region)
        validate_weights(weights, TRACKS, max_weight=HAPROXY_MAX_WEIGHT, what="track")
        current = self.get_track_weights(region)
        missing = [t for t in weights if t not in current]
        if missing:
            raise HAProxyError(
                f"backend {self.backend!r} of region {region} has no server for track(s) {', '.join(missing)}"
            )
        validate_weights(weights, TRACKS, max_weight=HAPROXY_MAX_WEIGHT, what="track", current=current)
        runtime.set_weights(self.backend, weights)
