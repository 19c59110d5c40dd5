"""Deployment and HPA status as the Kubernetes controllers would compute them, for the node agent.

Kept apart from the process management so the arithmetic the product relies on (observedGeneration,
ready counts, the Available and Progressing conditions) reads in one place.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from typing import Any, Protocol


class ReplicaView(Protocol):
    template_hash: str
    state: str
    ready: bool


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _max_unavailable(dep: dict[str, Any], desired: int) -> int:
    rolling = ((dep["spec"].get("strategy") or {}).get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    if isinstance(rolling, str) and rolling.endswith("%"):
        return desired * int(rolling[:-1]) // 100  # Kubernetes rounds maxUnavailable down
    return int(rolling)


def _condition(memory: dict[str, Any], ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
    # Times move only when the condition changes, as with the real controller; otherwise every
    # pass would rewrite the status and bump resourceVersion.
    prev = memory.get(ctype)
    if prev and (prev["status"], prev["reason"]) == (status, reason):
        return prev
    now = _now()
    cond = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": now if not prev or prev["status"] != status else prev["lastTransitionTime"],
    }
    memory[ctype] = cond
    return cond


def deployment_status(
    dep: dict[str, Any], replicas: Sequence[ReplicaView], template_hash: str, memory: dict[str, Any]
) -> dict[str, Any]:
    """The status subresource of `dep` given its live replicas. `memory` persists between calls."""
    name = f"{dep['metadata']['name']}-{template_hash}"  # the conditions name the new ReplicaSet
    desired = int(dep["spec"].get("replicas", 1))
    alive = [r for r in replicas if r.state != "killed"]
    updated = [r for r in alive if r.template_hash == template_hash]
    ready = [r for r in alive if r.ready]
    ready_updated = [r for r in updated if r.ready]
    available = len(ready) >= desired - _max_unavailable(dep, desired)
    complete = len(updated) == desired and len(ready_updated) == desired and len(alive) == desired
    # The deadline counts from the last progress, as the controller's does (deploymentutil's
    # DeploymentTimedOut measures from the Progressing condition's lastUpdateTime, which a new
    # spec, a new updated replica or a newly available one moves).
    progress = (int(dep["metadata"].get("generation", 1)), len(updated), len(ready_updated), len(ready))
    if memory.get("progress") != progress:
        memory["progress"] = progress
        memory.pop("progress_started", None)
    if complete:
        memory.pop("progress_started", None)
        progressing = ("True", "NewReplicaSetAvailable", f'ReplicaSet "{name}" has successfully progressed.')
    else:
        started = memory.setdefault("progress_started", time.monotonic())
        deadline = float(dep["spec"].get("progressDeadlineSeconds", 600))
        if time.monotonic() - started > deadline:
            progressing = (
                "False",
                "ProgressDeadlineExceeded",
                f'ReplicaSet "{name}" has timed out progressing.',
            )
        else:
            progressing = ("True", "ReplicaSetUpdated", f'ReplicaSet "{name}" is progressing.')
    return {
        "observedGeneration": int(dep["metadata"].get("generation", 1)),
        "replicas": len(alive),
        "updatedReplicas": len(updated),
        "readyReplicas": len(ready),
        "availableReplicas": len(ready),
        "unavailableReplicas": max(0, desired - len(ready)),
        "conditions": [
            _condition(
                memory,
                "Available",
                "True" if available else "False",
                "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                "Deployment has minimum availability."
                if available
                else "Deployment does not have minimum availability.",
            ),
            _condition(memory, "Progressing", *progressing),
        ],
    }


def hpa_target(dep: dict[str, Any], hpas: list[dict[str, Any]]) -> int | None:
    """Replicas an HPA on `dep` asks for: max(spec.replicas, minReplicas) capped at maxReplicas.

    None when no HPA targets `dep`, or when `dep` is scaled to 0 (the HPA is then inactive).
    """
    ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
    for hpa in hpas:
        ref = hpa["spec"].get("scaleTargetRef") or {}
        if (
            hpa["metadata"].get("namespace") == ns
            and ref.get("kind", "Deployment") == "Deployment"
            and ref.get("name") == name
        ):
            replicas = int(dep["spec"].get("replicas", 1))
            low = int(hpa["spec"].get("minReplicas", 1))
            if replicas == 0 and low > 0:
                # Kubernetes' implicit maintenance mode: a target scaled to 0 by hand is left alone
                # until someone scales it up again (drills and decommissions rely on it).
                return None
            high = int(hpa["spec"].get("maxReplicas", max(low, replicas)))
            return min(max(replicas, low), high)
    return None
