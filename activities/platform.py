"""Region-bound platform activities: capacity, scale, rollout wait (run on the region's queue).

Sync: the kubernetes client blocks, so these run on the worker's thread pool. One
KubernetesPlatform per region, built on first use so a worker starts while a cluster is down.
"""

from __future__ import annotations

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

# Kept from an attempt's start-to-close for the verdict to reach the server as a failure, not a timeout.
_WRAP_UP_S = 10.0


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
        """Wait like `kubectl rollout status`, heartbeating the replica counts as they move.

        One wait per attempt: the provider backs off between polls and heartbeats on each, and a
        verdict (rolled out, the controller's ProgressDeadlineExceeded, our deadline) ends it.
        The deadline is the Deployment's progressDeadlineSeconds plus the model's load time when
        that is longer than `timeout_s`, cut to what this attempt's start-to-close leaves.
        """
        name = self._deployment(inp.deployment)
        platform = self._platform(inp.region)
        info = activity.info()
        budget_s = inp.timeout_s
        if info.start_to_close_timeout is not None:
            attempt_s = info.start_to_close_timeout.total_seconds()
            budget_s = attempt_s - min(_WRAP_UP_S, attempt_s / 10)

        def progress(d: DeploymentState) -> None:
            activity.heartbeat(_status(inp.region, d).model_dump())

        try:
            d = platform.wait_rollout(
                name,
                min(inp.timeout_s, budget_s),
                on_progress=progress,
                load_allowance_s=self.cfg.workload.model_load_s,
                max_timeout_s=budget_s,
            )
            return _status(inp.region, d)
        except RolloutTimeout as exc:
            progress(exc.state)
            raise ApplicationError(
                f"{name} in {inp.region} not rolled out after {exc.timeout_s:g}s: {exc.missing}",
                type="RolloutTimeout",
                non_retryable=True,
            ) from exc
        except Exception as exc:
            raise app_error(exc, f"wait for rollout of {name} in {inp.region}") from exc


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(PlatformActivities(cfg))
