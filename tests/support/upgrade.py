"""Upgrade-test helpers: a drctl worker for one test (the product's own, on fresh task queues), an
upgrade request with short windows, running it, and reading what the clusters and gateways hold."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from kubernetes.client import CustomObjectsApi
from temporalio.client import Client, WorkflowHandle

from drctl.client.operations import start_operation
from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig, GatewayApiRegional
from drctl.devstack.gateway_controller import gateway_name
from drctl.models.upgrade import Outcome, UpgradeResult, upgrade_request
from drctl.providers.haproxy_replies import HAProxyError
from drctl.providers.haproxy_runtime import HAProxyRuntime
from drctl.providers.kube_client import api_client_for
from drctl.providers.kube_objects import MERGE
from drctl.worker.process import build_workers
from tests.support.devstack import apps_api
from tests.support.kubeapi import accepted_at
from tests.support.wait import wait_until
from workflows.migrate import Migration
from workflows.upgrade import Upgrade


def fresh_queues(cfg: FleetConfig) -> FleetConfig:
    tag = uuid.uuid4().hex[:8]
    regions = [r.model_copy(update={"task_queue": f"t-{tag}-{r.name}"}) for r in cfg.regions]
    temporal = cfg.temporal.model_copy(update={"task_queue": f"t-{tag}"})
    return cfg.model_copy(update={"regions": regions, "temporal": temporal})


@asynccontextmanager
async def running_worker(client: Client, cfg: FleetConfig) -> AsyncIterator[None]:
    """All of drctl's workflows and activities on cfg's queues until the block exits."""
    with ThreadPoolExecutor(max_workers=16) as executor:
        workers = build_workers(client, cfg, None, executor)
        tasks = [asyncio.create_task(w.run()) for w in workers]
        try:
            yield
        finally:
            await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
            await asyncio.gather(*tasks, return_exceptions=True)


def _route_api(cfg: FleetConfig, region: str) -> tuple[Any, tuple[str, str, str, str, str]]:
    r = cfg.region(region)
    where = ("gateway.networking.k8s.io", "v1", r.kube.namespace, "httproutes", cfg.workload.app)
    return CustomObjectsApi(api_client_for(r.kube)), where


def _patch_routes(cfg: FleetConfig, spec: Callable[[str], dict[str, Any]], accepted: bool) -> None:
    """Merge-patch each region's route spec (`spec(region)`); with `accepted`, wait for its controller."""
    for region in cfg.region_names:
        custom, where = _route_api(cfg, region)
        custom.patch_namespaced_custom_object(*where, {"spec": spec(region)}, _content_type=MERGE)
    for region in cfg.region_names if accepted else []:
        custom, where = _route_api(cfg, region)
        wait_until(
            lambda custom=custom, where=where: accepted_at(custom.get_namespaced_custom_object(*where)),
            timeout_s=20,
            what=f"the HTTPRoute of {region} accepted by its controller",
        )


@contextmanager
def through_routes(cfg: FleetConfig) -> Iterator[FleetConfig]:
    """`cfg` on the Gateway API regional tier: each region's HTTPRoute attached to the region's
    Gateway, so the dev stack's gateway controller programs the region gateway from it. Afterwards
    the route is back to stable only (programmed), then detached: HAProxy's tier owns it again."""
    _patch_routes(cfg, lambda region: {"parentRefs": [{"name": gateway_name(region)}]}, accepted=True)
    tier = GatewayApiRegional(kind="gateway-api", httproute=cfg.workload.app)
    try:
        yield cfg.model_copy(update={"traffic": cfg.traffic.model_copy(update={"regional_tier": tier})})
    finally:
        stable = {"name": cfg.workload.deployment_name("stable"), "port": 80, "weight": 100}
        _patch_routes(cfg, lambda _: {"rules": [{"backendRefs": [stable]}]}, accepted=True)
        _patch_routes(cfg, lambda _: {"parentRefs": None}, accepted=False)


def track_weights(cfg: FleetConfig, region: str) -> dict[str, int]:
    sock = cfg.region(region).gateway_runtime_socket or ""
    return HAProxyRuntime(sock).get_weights("region")


def track_weight_is(cfg: FleetConfig, region: str, track: str, weight: int) -> bool:
    """For polls: whether `track` holds `weight` now. A runtime socket that answers late (CI saw
    one take over 2 s on a loaded machine) is "not yet", as a poll's other misses are."""
    try:
        return track_weights(cfg, region).get(track) == weight
    except HAProxyError:
        return False


def deployments(cfg: FleetConfig, region: str) -> dict[str, Any]:
    r = cfg.region(region)
    return {
        d.metadata.name: d
        for d in apps_api(r.kube.api_url or "").list_namespaced_deployment(r.kube.namespace).items
    }


def stable_container(cfg: FleetConfig, region: str) -> Any:
    return deployments(cfg, region)["llm-stable"].spec.template.spec.containers[0]


class WeightWatch:
    """Samples every region's track weights while an upgrade runs (what users are routed to)."""

    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self.samples: list[dict[str, dict[str, int]]] = []

    async def run(self) -> None:
        for _ in range(20000):  # bounded: 0.05 s × 20000 = 1000 s at most
            snap = {r: await asyncio.to_thread(track_weights, self.cfg, r) for r in self.cfg.region_names}
            self.samples.append(snap)
            await asyncio.sleep(0.05)


def upgrade_req(cfg: FleetConfig, image: str, **kw: Any) -> Any:
    """An upgrade request with short windows (the suite stays fast; a few samples still judge)."""
    req = upgrade_request(cfg, uuid.uuid4().hex[:8], image, **kw)
    # Short windows keep the suite fast; a few samples per window still judge a clear difference.
    return req.model_copy(
        update={
            "step_pause_s": 1.0,
            "scale_down_delay_s": 1.0,
            "limits": req.limits.model_copy(update={"min_samples": 8}),
        }
    )


async def start_upgrade(
    client: Client, cfg: FleetConfig, req: Any, **search: str
) -> WorkflowHandle[Any, Any]:
    """The upgrade `req`, started the way `drctl upgrade` starts it."""
    wid = f"upgrade/{cfg.name}/{req.upgrade_id}"
    return await start_operation(
        client, cfg, Upgrade.run, req, operation="upgrade", workflow_id=wid, **search
    )


async def start_migration(
    client: Client, cfg: FleetConfig, req: Any, source: str = "us-west-1", target: str = "us-east-1"
) -> WorkflowHandle[Any, Any]:
    """The migration `req`, started the way `drctl migrate` starts it."""
    wid = f"migrate/{cfg.name}/{req.migration_id}"
    search = {"source": source, "target": target}
    return await start_operation(
        client, cfg, Migration.run, req, operation="migrate", workflow_id=wid, **search
    )


async def run_upgrade(
    client: Client, cfg: FleetConfig, req: Any, watch: WeightWatch | None = None
) -> UpgradeResult:
    handle = await start_upgrade(client, cfg, req)
    watcher = asyncio.create_task(watch.run()) if watch else None
    try:
        return await asyncio.wait_for(result_of(handle, UpgradeResult), timeout=180)
    finally:
        if watcher:
            watcher.cancel()


async def rolled_back_canary(
    client: Client,
    cfg: FleetConfig,
    image: str,
    region: str,
    env: dict[str, str],
    steps_percent: list[int],
    watch: WeightWatch | None = None,
) -> tuple[Any, UpgradeResult]:
    """A canary wave of `image` in `region` whose replicas misbehave as `env` makes fleetsim, run to
    its end: the request and the result, which must be ROLLED_BACK."""
    req = upgrade_req(cfg, image, steps_percent=steps_percent, regions=[region], env=env)
    res = await run_upgrade(client, cfg, req, watch)
    assert res.outcome is Outcome.ROLLED_BACK, res
    return req, res
