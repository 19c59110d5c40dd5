"""Global traffic activities: read, apply and wait for region weights (run on the TARGET region's queue).

Applying and waiting are separate activities because on Route 53 they are minutes apart: the apply
returns as soon as the change is accepted (PENDING), so it never outlives its start-to-close and a
timeout can never re-send the change; the wait heartbeats and owns its own deadline.

Sync: the providers use blocking clients (HAProxy unix socket, boto3), so these run on the
worker's thread pool.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import CancelledError

from activities.defined import activity_methods
from activities.errors import app_error, refuse_all_zero
from drctl.config.schema import FleetConfig
from drctl.models.activity_io import SetWeightsInput, Weights
from drctl.models.traffic import PropagationInput, PropagationResult, WeightsApplied
from drctl.providers.base import GlobalTraffic
from drctl.providers.errors import classify
from drctl.providers.traffic_factory import global_traffic
from drctl.telemetry import metrics

# A throttled GetChange backs off up to this; kept under the callers' 10 s heartbeat timeout.
MAX_POLL_BACKOFF_S = 5.0


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
    def set_global_weights(self, inp: SetWeightsInput) -> WeightsApplied:
        """Apply all region weights at once; return what the tier reports and the change's id, without waiting."""
        refuse_all_zero(inp.weights, "region weight")
        activity.logger.info("applying global weights %s (%s)", inp.weights, inp.reason)
        try:
            applied = self._tier().apply_weights(inp.weights)
            got = self._tier().get_weights()
        except Exception as exc:
            raise app_error(exc, f"set global weights {inp.weights}") from exc
        metrics.record_weights(self.cfg.name, got)
        return WeightsApplied(
            weights=got, change_id=applied.change_id, propagated=applied.propagated, status=applied.status
        )

    @activity.defn(name="wait_global_propagation")
    def wait_global_propagation(self, inp: PropagationInput) -> PropagationResult:
        """Poll until the change is in effect everywhere, heartbeating.

        Reaching the deadline is an answer (propagated=False), not an error: the change stands, and
        the workflow decides what a slow propagation means. Transient errors (Throttling) back off
        and keep polling; only errors no retry can fix end the activity.
        """
        started = time.monotonic()
        polls, delay, last_error = 0, inp.poll_s, None

        def result(propagated: bool) -> PropagationResult:
            return PropagationResult(
                change_id=inp.change_id,
                propagated=propagated,
                status="INSYNC" if propagated else "PENDING",
                waited_s=round(time.monotonic() - started, 3),
                polls=polls,
                last_error=last_error,
            )

        while True:
            activity.heartbeat(polls)
            polls += 1
            try:
                if self._tier().is_propagated(inp.change_id):
                    return result(True)
                delay = inp.poll_s
            except Exception as exc:
                err = classify(exc, f"read status of change {inp.change_id}")
                if not err.retryable:
                    raise app_error(exc, f"read status of change {inp.change_id}") from exc
                last_error, delay = err.message, min(delay * 2, MAX_POLL_BACKOFF_S)
            left = inp.timeout_s - (time.monotonic() - started)
            if left <= 0:
                return result(False)
            activity.wait_for_cancelled_sync(min(delay, left))
            if activity.is_cancelled():
                raise CancelledError(f"stopped waiting for change {inp.change_id}")


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(TrafficActivities(cfg))
