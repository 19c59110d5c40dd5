"""Fault actions for Chaos Toolkit experiments, acting through the platform.

`drills.fault_injector` picks the path:
- `devstack`: the region admin API of the dev stack (docs/devstack.md), which kills, freezes or
  slows the real inference-server and HAProxy processes it runs, and stops drctl's own control
  plane (the Temporal server, a region's worker) until the rollback starts it again;
- `kubernetes`: the region's Kubernetes API: scale the track Deployment to 0 (its replica count is
  kept in an annotation so a rollback in another process restores it) and delete pods.

Every action refuses a region outside `drills.allowed_targets` before touching anything, and
raises when nothing was hurt, so a fault that did not happen never reads as injected.
"""

from __future__ import annotations

from typing import Any

from drctl.chaos import ensure_allowed, fleet
from drctl.chaos.faults import (
    OWNER_ANNOTATION,
    RESTORE_ANNOTATION,
    FaultNotInjected,
    admin,
    apps_api,
    clear_region,
)
from drctl.chaos.faults import now as _now
from drctl.config.schema import FleetConfig, RegionConfig
from drctl.providers.kube_objects import MERGE, STRICT

# Stopping a process takes up to a few seconds (SIGTERM, then SIGKILL) on a loaded machine.
CONTROL_PLANE_TIMEOUT_S = 30.0

__all__ = [
    "RESTORE_ANNOTATION",
    "FaultNotInjected",
    "clear_faults",
    "degrade_region",
    "kill_gateway",
    "kill_region_replicas",
    "kill_replicas",
    "stop_temporal",
    "stop_worker",
]


def _owner(configuration: dict[str, Any] | None) -> str | None:
    """The drill workflow id the worker wrote into the configuration: the fault's owner marker."""
    owner = (configuration or {}).get("drill_id")
    return str(owner) if owner else None


def _target(configuration: dict[str, Any] | None, region: str) -> tuple[FleetConfig, RegionConfig]:
    cfg = fleet(configuration)
    region_cfg = cfg.region(region)
    ensure_allowed(cfg, region)
    return cfg, region_cfg


def _admin(
    region: RegionConfig, path: str, body: dict[str, Any], configuration: dict[str, Any] | None
) -> Any:
    return admin(region, path, {**body, "owner": _owner(configuration)})


def _admin_kill(
    rc: RegionConfig, fault: str, body: dict[str, Any], configuration: dict[str, Any] | None
) -> dict[str, Any]:
    """A replica fault through the dev stack's admin API, which names the replicas it hurt."""
    out = _admin(rc, "/faults/replicas", {"action": "kill", **body}, configuration)
    return _injected(rc.name, fault, list(out.get("affected", [])))


def _core(region: RegionConfig) -> Any:
    from kubernetes import client

    return client.CoreV1Api(apps_api(region).api_client)


def _unsupported(cfg: FleetConfig, what: str) -> FaultNotInjected:
    return FaultNotInjected(
        f"fault '{what}' needs the devstack injector; drills.fault_injector is {cfg.drills.fault_injector!r}"
    )


def _injected(region: str, fault: str, affected: list[str], **extra: Any) -> dict[str, Any]:
    if not affected:
        raise FaultNotInjected(f"{fault} in {region}: nothing matched, nothing was hurt")
    return {"injected": True, "fault": fault, "region": region, "affected": affected, "at": _now(), **extra}


def kill_region_replicas(
    region: str, track: str = "stable", configuration: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Region outage: every replica of the track goes down and stays down until `clear_faults`."""
    cfg, rc = _target(configuration, region)
    if cfg.drills.fault_injector == "devstack":
        return _admin_kill(rc, "region-outage", {"track": track, "stay_down": True}, configuration)
    apps = apps_api(rc)
    name, ns = cfg.workload.deployment_name(track), rc.kube.namespace
    dep = apps.read_namespaced_deployment(name, ns)
    replicas = int(dep.spec.replicas or 0)
    if replicas == 0:
        raise FaultNotInjected(f"deployment {ns}/{name} in {region} already has 0 replicas")
    annotations = dict(dep.metadata.annotations or {})
    # Keep the first recorded count: a second outage on top of the first must not restore to 0.
    annotations.setdefault(RESTORE_ANNOTATION, str(replicas))
    if _owner(configuration):
        annotations[OWNER_ANNOTATION] = str(_owner(configuration))
    # An HPA stops acting on a target scaled to 0, so the outage holds until the rollback.
    apps.patch_namespaced_deployment(
        name,
        ns,
        {"metadata": {"annotations": annotations}, "spec": {"replicas": 0}},
        _content_type=MERGE,
        field_validation=STRICT,
    )
    return _injected(region, "region-outage", [f"{name}:{replicas}->0"])


def kill_replicas(
    region: str, count: int = 1, track: str = "stable", configuration: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Lose `count` replicas; the platform brings them back (the drill checks it does not fail over)."""
    if count < 1:
        raise ValueError("count must be at least 1")
    cfg, rc = _target(configuration, region)
    if cfg.drills.fault_injector == "devstack":
        return _admin_kill(rc, "replica-loss", {"track": track, "count": count}, configuration)
    core = _core(rc)
    selector = f"app={cfg.workload.app},drctl.io/track={track}"
    pods = core.list_namespaced_pod(rc.kube.namespace, label_selector=selector).items
    victims = sorted(p.metadata.name for p in pods)[:count]
    for pod in victims:
        core.delete_namespaced_pod(pod, rc.kube.namespace)
    return _injected(region, "replica-loss", victims)


def degrade_region(
    region: str,
    added_latency_ms: float = 0.0,
    error_rate: float = 0.0,
    track: str = "stable",
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Region degradation: slower first tokens and a fraction of 500s on every replica of the track."""
    if added_latency_ms <= 0 and error_rate <= 0:
        raise ValueError("give added_latency_ms > 0 or error_rate > 0")
    if not 0 <= error_rate <= 1:
        raise ValueError("error_rate must be within 0..1")
    cfg, rc = _target(configuration, region)
    if cfg.drills.fault_injector != "devstack":
        raise _unsupported(cfg, "degrade_region")
    body = {"track": track, "added_latency_ms": added_latency_ms, "error_rate": error_rate}
    out = _admin(rc, "/faults/inference", body, configuration)
    affected = out.get("affected") if isinstance(out, dict) else None
    # The admin API applies inference faults to later replicas too; without a list it names none.
    return _injected(region, "region-degradation", list(affected or [f"{region}/{track}"]), **body)


def kill_gateway(region: str, configuration: dict[str, Any] | None = None) -> dict[str, Any]:
    """Region gateway loss: the gateway process dies and stays down until `clear_faults`."""
    cfg, rc = _target(configuration, region)
    if cfg.drills.fault_injector != "devstack":
        raise _unsupported(cfg, "kill_gateway")
    out = _admin(rc, "/faults/gateway", {"action": "kill"}, configuration)
    affected = out.get("affected") if isinstance(out, dict) else None
    return _injected(region, "gateway-loss", list(affected or [f"{region}/gateway"]))


def clear_faults(
    region: str, track: str = "stable", configuration: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Rollback: undo every fault in the region (restart, thaw, restore the gateway, restore replicas)."""
    cfg, _ = _target(configuration, region)
    return clear_region(cfg, region, (track,))


def _stop_control_plane(
    region: str, component: str, fault: str, configuration: dict[str, Any] | None
) -> dict[str, Any]:
    cfg, rc = _target(configuration, region)
    if _owner(configuration):
        # The worker writes drill_id for a drill it runs: that drill's own workflow, activity and
        # worker would stop under it, and nothing would be left to run the rollback.
        raise FaultNotInjected(
            f"{fault}: a drill run by Temporal cannot stop its own control plane; run this experiment "
            "with `chaos run` (docs/operations.md, control-plane drills)"
        )
    if cfg.drills.fault_injector != "devstack":
        raise _unsupported(cfg, fault.replace("-", "_"))
    body = {"action": "stop", "component": component, "owner": _owner(configuration)}
    out = admin(rc, "/faults/control-plane", body, timeout_s=CONTROL_PLANE_TIMEOUT_S)
    return _injected(region, fault, list(out.get("affected") or []))


def stop_temporal(region: str, configuration: dict[str, Any] | None = None) -> dict[str, Any]:
    """Control-plane loss: the Temporal server `region` hosts stops, and stays down until `clear_faults`."""
    return _stop_control_plane(region, "temporal", "stop-temporal", configuration)


def stop_worker(region: str, configuration: dict[str, Any] | None = None) -> dict[str, Any]:
    """Control-plane loss: `region`'s own drctl worker stops, and stays down until `clear_faults`."""
    return _stop_control_plane(region, "worker", "stop-worker", configuration)
