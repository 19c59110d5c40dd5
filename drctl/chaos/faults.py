"""Faults a drill left in a region: who owns them, and how to clear them without `chaos run`.

Every fault drctl's actions inject carries its drill's workflow id: the dev stack's admin API keeps
it (GET /faults lists `owners`), and a Kubernetes outage writes it in the Deployment annotation
OWNER_ANNOTATION next to the saved replica count. That marker lets the drill workflow clear its own
faults when the experiment activity died with its worker, and lets a worker at start clear faults
whose drill is no longer running.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx

from drctl.config.schema import FleetConfig, RegionConfig
from drctl.providers.kube_objects import MERGE, STRICT

RESTORE_ANNOTATION = "drctl.io/drill-restore-replicas"
OWNER_ANNOTATION = "drctl.io/drill-workflow-id"
TRACKS = ("stable", "canary")
_ADMIN_TIMEOUT_S = 10.0
# A clear waits for a stopped Temporal server and worker to serve again (each bounded at 60 s there).
CLEAR_TIMEOUT_S = 150.0


class FaultNotInjected(Exception):
    """The platform accepted the call but hurt nothing, or cannot inject this fault at all."""


def now() -> str:
    return datetime.now(UTC).isoformat()


def admin(
    region: RegionConfig,
    path: str,
    body: dict[str, Any] | None = None,
    method: str = "POST",
    timeout_s: float = _ADMIN_TIMEOUT_S,
) -> Any:
    if not region.devstack_admin_url:
        raise FaultNotInjected(f"region {region.name} has no devstack_admin_url in the fleet config")
    url = region.devstack_admin_url.rstrip("/") + path
    resp = httpx.request(method, url, json=body if method == "POST" else None, timeout=timeout_s)
    resp.raise_for_status()
    return resp.json() if resp.content else {}


def apps_api(region: RegionConfig) -> Any:
    from kubernetes import client

    from drctl.providers.kube_client import api_client_for

    # The same credentials as the worker's own calls (in-cluster, kubeconfig or exec auth).
    return client.AppsV1Api(api_client_for(region.kube))


def _held_deployment(cfg: FleetConfig, region: RegionConfig, track: str, apps: Any) -> Any | None:
    from kubernetes.client.exceptions import ApiException

    try:
        dep = apps.read_namespaced_deployment(cfg.workload.deployment_name(track), region.kube.namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dep if RESTORE_ANNOTATION in (dep.metadata.annotations or {}) else None


def owners(cfg: FleetConfig, region: str) -> set[str]:
    """Drill workflow ids that hold a fault in `region` now."""
    rc = cfg.region(region)
    if cfg.drills.fault_injector == "devstack":
        return set(admin(rc, "/faults", method="GET").get("owners") or [])
    apps = apps_api(rc)
    held = [_held_deployment(cfg, rc, t, apps) for t in TRACKS]
    # A fault written before owners were recorded reads as owned by nobody: "" (never running).
    return {(d.metadata.annotations or {}).get(OWNER_ANNOTATION, "") for d in held if d is not None}


def _held_devstack(body: Any) -> list[str]:
    """What the admin API's GET /faults says is still injected, one line per fault."""
    body = body if isinstance(body, dict) else {}
    held = [
        f"replica {r.get('pod')} ({r.get('state')}{', kept down' if r.get('stay_down') else ''})"
        for r in body.get("replicas") or []
        if isinstance(r, dict)
    ]
    if body.get("gateway"):
        held.append(f"gateway {body['gateway']}")
    held += [f"inference fault on {track}" for track in sorted(body.get("inference") or {})]
    held += [f"partition from {src}" for src in body.get("partitioned") or []]
    held += [f"control plane: {c} stopped" for c in body.get("control_plane") or []]
    return held


def still_injected(cfg: FleetConfig, region: str) -> list[str]:
    """Every drill fault `region` holds now, read back through the API that injects them ([] if clear)."""
    rc = cfg.region(region)
    if cfg.drills.fault_injector == "devstack":
        return _held_devstack(admin(rc, "/faults", method="GET"))
    apps = apps_api(rc)
    held = [_held_deployment(cfg, rc, t, apps) for t in TRACKS]
    return [
        f"deployment {d.metadata.name} scaled to 0 (restore to {d.metadata.annotations[RESTORE_ANNOTATION]})"
        for d in held
        if d is not None
    ]


def clear_region(cfg: FleetConfig, region: str, tracks: tuple[str, ...] = TRACKS) -> dict[str, Any]:
    """Undo every drill fault in the region: restart, thaw, restore the gateway, restore replicas."""
    rc = cfg.region(region)
    if cfg.drills.fault_injector == "devstack":
        out = admin(rc, "/faults/clear", timeout_s=CLEAR_TIMEOUT_S)
        restarted = out.get("restarted") if isinstance(out, dict) else None
        return {"cleared": True, "region": region, "restarted": restarted or None, "at": now()}
    apps = apps_api(rc)
    restored: list[str] = []
    for track in tracks:
        dep = _held_deployment(cfg, rc, track, apps)
        if dep is None:
            continue
        annotations = dict(dep.metadata.annotations or {})
        saved = annotations[RESTORE_ANNOTATION]
        kept = {k: v for k, v in annotations.items() if k not in (RESTORE_ANNOTATION, OWNER_ANNOTATION)}
        # A merge patch only deletes a key given as null; the kept ones are written back unchanged.
        patch = {
            "metadata": {"annotations": {**kept, RESTORE_ANNOTATION: None, OWNER_ANNOTATION: None}},
            "spec": {"replicas": int(saved)},
        }
        apps.patch_namespaced_deployment(
            dep.metadata.name, rc.kube.namespace, patch, _content_type=MERGE, field_validation=STRICT
        )
        restored.append(f"{dep.metadata.name}:{saved}")
    return {"cleared": True, "region": region, "restored": ",".join(restored) or None, "at": now()}
