"""Region-bound platform activities: capacity, scale, rollout wait (run on the region's queue).

Sync: the kubernetes client blocks, so these run on the worker's thread pool. One
KubernetesPlatform per region, built on first use so a worker starts while a cluster is down.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from activities.errors import app_error
from activities.per_region import PerRegion
from drctl.config.schema import FleetConfig
from drctl.models.activity_io import Capacity, DeploymentStatus, RegionRequest, ScaleInput, WaitRolloutInput
from drctl.models.failover import capacity_of
from drctl.providers.base import DeploymentState, Platform
from drctl.providers.errors import RolloutTimeout
from drctl.providers.kubernetes import KubernetesPlatform

# Slice of a rollout wait between heartbeats: the heartbeat must not depend on how often the
# provider reports progress.
_WAIT_SLICE_S = 3.0


def _status(region: str, d: DeploymentState) -> DeploymentStatus:
    # The counts and the GitOps marker under the state's own names; the rest the state derives.
    counts = d.model_dump(include=set(DeploymentStatus.model_fields))
    return DeploymentStatus(region=region, deployment=d.name, rolled_out=d.rolled_out, **counts)


class PlatformActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self._platform: PerRegion[Platform] = PerRegion(lambda region: KubernetesPlatform(cfg.region(region)))

    def _deployment(self, name: str | None) -> str:
        return name or self.cfg.workload.deployment_name("stable")

    @activity.defn(name="get_capacity")
    def get_capacity(self, inp: RegionRequest) -> Capacity:
        name = self._deployment(None)
        try:
            d = self._platform(inp.region).get_deployment(name)
        except Exception as exc:
            raise app_error(exc, f"read deployment {name} in {inp.region}") from exc
        return capacity_of(
            inp.region,
            name,
            d.replicas,
            d.ready_replicas,
            self.cfg.region(inp.region).max_replicas,
            d.hpa_min_replicas,
            d.hpa_max_replicas,
        )

    @activity.defn(name="scale_deployment")
    def scale_deployment(self, inp: ScaleInput) -> DeploymentStatus:
        name = self._deployment(inp.deployment)
        activity.logger.info("scaling %s in %s to %d", name, inp.region, inp.replicas)
        try:
            return _status(inp.region, self._platform(inp.region).scale(name, inp.replicas))
        except Exception as exc:
            raise app_error(exc, f"scale {name} in {inp.region} to {inp.replicas}") from exc

    @activity.defn(name="wait_rollout")
    def wait_rollout(self, inp: WaitRolloutInput) -> DeploymentStatus:
        """Wait like `kubectl rollout status`, heartbeating the replica counts as they move."""
        name = self._deployment(inp.deployment)
        platform = self._platform(inp.region)
        deadline = time.monotonic() + inp.timeout_s

        def progress(d: DeploymentState) -> None:
            activity.heartbeat(_status(inp.region, d).model_dump())

        while True:
            left = deadline - time.monotonic()
            try:
                d = platform.wait_rollout(name, max(0.1, min(_WAIT_SLICE_S, left)), on_progress=progress)
                return _status(inp.region, d)
            except RolloutTimeout as exc:
                progress(exc.state)
                if time.monotonic() >= deadline:
                    raise ApplicationError(
                        f"{name} in {inp.region} not rolled out after {inp.timeout_s:g}s: {exc.missing}",
                        type="RolloutTimeout",
                        non_retryable=True,
                    ) from exc
            except Exception as exc:
                raise app_error(exc, f"wait for rollout of {name} in {inp.region}") from exc


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(PlatformActivities(cfg))
