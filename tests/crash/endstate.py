"""End state of an operation after a kill point: what the fleet shows, read from the real components.

Global weights from HAProxy's runtime API, track weights from each region gateway's, replicas and
releases from the emulated clusters, faults from the dev-stack admin API, and the fleet lock from
its workflow (FleetLock, workflows/lock.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import Enum
from typing import Any

import httpx
from temporalio.client import Client

from drctl.config.schema import TRACKS, FleetConfig
from drctl.models.lock import QUERY_HOLDERS, LockState, lock_id
from drctl.providers.haproxy_runtime import HAProxyRuntime
from drctl.providers.kube_objects import on_conflict
from drctl.providers.kubernetes import KubernetesPlatform
from tests.support.devstack import apps_api
from tests.support.wait import assert_eventually, wait_until
from tests.support.workers import weights


@dataclass(frozen=True)
class EndState:
    """What a finished operation must leave; None: not judged for this operation."""

    verdict: str
    weights: dict[str, int]
    tracks: dict[str, dict[str, int]] | None = None
    replicas: dict[str, int] | None = None
    releases: dict[str, str] | None = None
    settle_s: float = 0.0
    # Text the result's error, reason or reasons must contain.
    says: str | None = None
    # Result fields and the values they must hold, e.g. {"compensated": "restored_weights"}.
    fields: dict[str, Any] | None = None


def track_weights(cfg: FleetConfig, region: str) -> dict[str, int]:
    sock = cfg.region(region).gateway_runtime_socket or ""
    backend = getattr(cfg.traffic.regional_tier, "backend", "region")
    got = HAProxyRuntime(sock).get_weights(backend)
    return {t: got[t] for t in TRACKS if t in got}


def stable_replicas(cfg: FleetConfig, region: str) -> int:
    return (
        KubernetesPlatform(cfg.region(region)).get_deployment(cfg.workload.deployment_name("stable")).replicas
    )


def release(cfg: FleetConfig, region: str) -> str:
    """The image the stable Deployment runs in `region`."""
    r = cfg.region(region)
    dep = apps_api(r.kube.api_url or "").read_namespaced_deployment(
        cfg.workload.deployment_name("stable"), r.kube.namespace
    )
    return str(dep.spec.template.spec.containers[0].image)


def reset_release(cfg: FleetConfig) -> None:
    """Stable back on the configured image everywhere (an upgrade kill point may have promoted another)."""
    for r in cfg.regions:
        apps = apps_api(r.kube.api_url or "")
        name = cfg.workload.deployment_name("stable")

        def reset(apps: Any = apps, name: str = name, ns: str = r.kube.namespace) -> None:
            dep = apps.read_namespaced_deployment(name, ns)
            if dep.spec.template.spec.containers[0].image != cfg.workload.image:
                dep.spec.template.spec.containers[0].image = cfg.workload.image
                apps.replace_namespaced_deployment(name, ns, dep)

        on_conflict(reset)  # the node agent writes status meanwhile: a 409 reads again


def faults_left(cfg: FleetConfig) -> dict[str, Any]:
    """Every fault the regions' admin APIs still hold ({} when none)."""
    left = {}
    for r in cfg.regions:
        got = httpx.get(f"{(r.devstack_admin_url or '').rstrip('/')}/faults", timeout=10).json()
        held = {k: v for k, v in got.items() if k != "owners" and v}
        if held:
            left[r.name] = held
    return left


async def lock_holders(client: Client, cfg: FleetConfig) -> list[str]:
    """Workflow ids holding the fleet lock; [] when the lock workflow has ended or holds nobody."""
    handle = client.get_workflow_handle(lock_id(cfg.name))
    try:
        desc = await handle.describe()
    except Exception:  # noqa: BLE001 - never started: nobody holds the fleet
        return []
    if desc.status is None or desc.status.name != "RUNNING":
        return []
    state = await handle.query(QUERY_HOLDERS, result_type=LockState)
    return [h.workflow_id for h in state.holders]


def verdict(res: Any) -> str:
    """The result's verdict: `status` (failover, failback), `outcome` (upgrade, migration) or `verdict` (drill)."""
    v = getattr(res, "status", None) or getattr(res, "outcome", None) or getattr(res, "verdict", None)
    return str(v.value if isinstance(v, Enum) else v)


def tracks_deployed(cfg: FleetConfig, region: str) -> list[str]:
    r = cfg.region(region)
    names = [
        d.metadata.name
        for d in apps_api(r.kube.api_url or "").list_namespaced_deployment(r.kube.namespace).items
    ]
    return sorted(t for t in TRACKS if cfg.workload.deployment_name(t) in names)


async def assert_end_state(
    client: Client, cfg: FleetConfig, res: Any, want: EndState, faults_expected: bool = False
) -> None:
    """The end state; `faults_expected` when the test injected the fault the operation answers."""
    why = str(getattr(res, "error", None) or getattr(res, "reason", None) or getattr(res, "reasons", ""))
    assert verdict(res) == want.verdict, f"verdict {verdict(res)!r}, want {want.verdict!r}: {why}"
    assert want.says is None or want.says in why, f"result does not say {want.says!r}: {why}"
    for name, value in (want.fields or {}).items():
        assert getattr(res, name) == value, f"result {name}={getattr(res, name)!r}, want {value!r}: {why}"

    def settled() -> bool:
        assert weights(cfg) == want.weights
        for region, tracks in (want.tracks or {}).items():
            assert track_weights(cfg, region) == tracks, region
        for region, n in (want.replicas or {}).items():
            assert stable_replicas(cfg, region) == n, region
        for region, image in (want.releases or {}).items():
            assert release(cfg, region) == image, region
        for region in cfg.region_names:  # no canary, blue or green left behind
            assert tracks_deployed(cfg, region) == ["stable"], region
        if not faults_expected:
            assert faults_left(cfg) == {}
        return True

    # An operation's own changes are in place when it returns; `settle_s` gives what it set in
    # motion (a drill's failback by the monitor) time to finish.
    await asyncio.to_thread(wait_until, settled, want.settle_s or 0.01, 0.25, "the fleet's end state")
    # The release is a signal sent before the operation returns; the lock handles it a moment later.
    await assert_eventually(
        lambda: _released(client, cfg), timeout_s=10, interval_s=0.1, what="fleet lock released"
    )


async def _released(client: Client, cfg: FleetConfig) -> bool:
    holders = await lock_holders(client, cfg)
    assert holders == [], f"fleet lock still held by {holders}"
    return True
