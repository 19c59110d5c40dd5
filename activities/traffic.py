"""Global traffic activities: read and set region weights (run on the TARGET region's queue).

Sync: the providers use blocking clients (HAProxy unix socket, boto3), so these run on the
worker's thread pool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import app_error
from drctl import metrics
from drctl.config import FleetConfig
from drctl.models.ops import SetWeightsInput, Weights
from drctl.providers.base import GlobalTraffic
from drctl.providers.traffic_factory import global_traffic


class TrafficActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self._global: GlobalTraffic | None = None

    def _tier(self) -> GlobalTraffic:
        # Built on first use: a worker must start even while the traffic tier is unreachable.
        if self._global is None:
            self._global = global_traffic(self.cfg)
        return self._global

    @activity.defn(name="get_global_weights")
    def get_global_weights(self) -> Weights:
        try:
            weights = self._tier().get_weights()
        except Exception as exc:
            raise app_error(exc, "read global weights") from exc
        metrics.record_weights(self.cfg.name, weights)
        return Weights(weights=weights)

    @activity.defn(name="set_global_weights")
    def set_global_weights(self, inp: SetWeightsInput) -> Weights:
        """Apply all region weights at once and return what the tier reports afterwards."""
        if sum(inp.weights.values()) <= 0:
            raise ApplicationError(
                f"refusing to set every region weight to 0 ({inp.weights}): traffic would have nowhere to go",
                type="AllWeightsZero",
                non_retryable=True,
            )
        bad = [r for r in inp.forbid_traffic_to if inp.weights.get(r, 0) > 0]
        if bad:
            raise ApplicationError(
                f"refusing to send traffic to unhealthy region(s) {', '.join(bad)}",
                type="UnhealthyTarget",
                non_retryable=True,
            )
        activity.logger.info("setting global weights %s (%s)", inp.weights, inp.reason)
        try:
            self._tier().set_weights(inp.weights)
            weights = self._tier().get_weights()
        except Exception as exc:
            raise app_error(exc, f"set global weights {inp.weights}") from exc
        metrics.record_weights(self.cfg.name, weights)
        return Weights(weights=weights)


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    acts = TrafficActivities(cfg)
    return [acts.get_global_weights, acts.set_global_weights]
