"""The objects the node agent publishes for the replicas it runs: ReplicaSets and Pods, as Kubernetes has them.

As the Deployment controller does, each pod template of a Deployment gets a ReplicaSet named
`<deployment>-<pod-template-hash>`, owned by the Deployment, its selector and template carrying the
`pod-template-hash` label; its pods are named `<replicaset>-<5 random characters>` (generateName),
owned by it. A Pod is bound to the agent's node (`spec.nodeName`), its IP is 127.0.0.1 and its
container port the one its fleetsim process listens on (every emulated pod shares the loopback
address). Its status is what the kubelet reports: phase Running, the PodScheduled, Initialized,
ContainersReady and Ready conditions, and the container's state and restart count.

The builders here are pure and drctl/devstack/nodeagent.py writes what they return, except
sync_replicasets, the ReplicaSet controller's and garbage collector's share of the agent's pass.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from drctl.devstack.kube_resources import now
from drctl.devstack.label_selector import ApiError

if TYPE_CHECKING:
    from drctl.devstack.kube import RegionCluster

PODS, REPLICASETS = "v1/pods", "apps/v1/replicasets"
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
POD_IP = "127.0.0.1"
# k8s.io/apimachinery/pkg/util/rand: the alphabet of generated names and of encoded hashes.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: dict[str, Any]) -> str:
    """The pod-template-hash label: a 32-bit FNV-1a of the template, encoded as SafeEncodeString does.

    The Deployment controller hashes the Go struct; this hashes its canonical JSON, so the value
    differs from a real cluster's but has its form and changes exactly when the template does.
    """
    h = 0x811C9DC5
    for byte in json.dumps(template, sort_keys=True, separators=(",", ":")).encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_ALPHABET[ord(c) % len(_ALPHABET)] for c in str(h))


def _owner(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def replicaset(dep: dict[str, Any], h: str, replicas: int, revision: int) -> dict[str, Any]:
    """The ReplicaSet the Deployment controller keeps for one pod template of `dep`."""
    meta, spec = dep["metadata"], dep["spec"]
    template = copy.deepcopy(spec.get("template") or {})
    template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = h
    selector = copy.deepcopy(spec.get("selector") or {})
    selector.setdefault("matchLabels", {})[HASH_LABEL] = h
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{h}",
            "namespace": meta["namespace"],
            "labels": dict(template["metadata"]["labels"]),
            "annotations": {
                REVISION: str(revision),
                "deployment.kubernetes.io/desired-replicas": str(spec.get("replicas", 1)),
            },
            "ownerReferences": [_owner("Deployment", dep)],
        },
        "spec": {"replicas": replicas, "selector": selector, "template": template},
    }


def pod(rs: dict[str, Any], node: str, port: int) -> dict[str, Any]:
    """A pod of `rs` bound to `node`, its first container port the one its process listens on."""
    template = rs["spec"]["template"]
    spec = copy.deepcopy(template.get("spec") or {})
    containers = spec.get("containers") or [{}]
    ports = [dict(p) for p in containers[0].get("ports") or [{"name": "http"}]]
    ports[0]["containerPort"] = port
    containers[0]["ports"] = ports
    spec.update(containers=containers, nodeName=node)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{rs['metadata']['name']}-",
            "namespace": rs["metadata"]["namespace"],
            "labels": dict((template.get("metadata") or {}).get("labels") or {}),
            "ownerReferences": [_owner("ReplicaSet", rs)],
        },
        "spec": spec,
    }


class PodView(Protocol):
    state: str  # starting | running | crashed | killed | frozen
    ready: bool
    restarts: int

    @property
    def pid(self) -> int | None: ...


def pod_status(p: PodView, pod_obj: dict[str, Any], memory: dict[str, str]) -> dict[str, Any]:
    """The kubelet's status for a pod; `memory` keeps the transition times between calls."""
    created = pod_obj["metadata"].get("creationTimestamp") or now()
    container = pod_obj["spec"]["containers"][0]
    ready = "True" if p.ready else "False"
    if memory.get("ready") != ready:
        memory.update(ready=ready, since=now())
    alive = p.state in ("starting", "running", "frozen")
    if alive:
        memory.setdefault("started", now())
        state: dict[str, Any] = {"running": {"startedAt": memory["started"]}}
    else:
        memory.pop("started", None)
        reason = "CrashLoopBackOff" if p.state == "crashed" else "Error"
        state = (
            {"waiting": {"reason": reason}}
            if p.state == "crashed"
            else {"terminated": {"exitCode": 137, "reason": reason}}
        )

    def condition(kind: str, status: str, since: str) -> dict[str, Any]:
        return {"type": kind, "status": status, "lastTransitionTime": since}

    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": [
            condition("PodScheduled", "True", created),
            condition("Initialized", "True", created),
            condition("ContainersReady", ready, memory["since"]),
            condition("Ready", ready, memory["since"]),
        ],
        "hostIP": POD_IP,
        "hostIPs": [{"ip": POD_IP}],
        "podIP": POD_IP,
        "podIPs": [{"ip": POD_IP}],
        "startTime": created,
        "qosClass": "BestEffort",
        "containerStatuses": [
            {
                "name": container.get("name", ""),
                "image": container.get("image", ""),
                "imageID": "",
                "ready": p.ready,
                "started": alive,
                "restartCount": p.restarts,
                "state": state,
            }
        ],
    }
    if alive and p.pid:
        status["containerStatuses"][0]["containerID"] = f"fleetsim://{p.pid}"
    return status


def revisions(replicasets: Iterable[dict[str, Any]]) -> dict[str, int]:
    """ReplicaSet name -> its deployment.kubernetes.io/revision."""
    out = {}
    for rs in replicasets:
        value = ((rs["metadata"].get("annotations") or {}).get(REVISION)) or "0"
        out[rs["metadata"]["name"]] = int(value) if value.isdigit() else 0
    return out


def owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> bool:
    uid = owner["metadata"].get("uid")
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])


class ReplicaView(Protocol):
    namespace: str
    deployment: str
    template_hash: str
    state: str
    ready: bool


async def sync_replicasets(
    cluster: RegionCluster,
    deployments: list[dict[str, Any]],
    every: list[dict[str, Any]],
    replicas: Sequence[ReplicaView],
) -> None:
    """Each ReplicaSet of a tracked Deployment (`deployments`) follows its pods (replicas, status);
    one whose owning Deployment is gone from `every` is deleted, as the garbage collector would; old
    ones scaled to 0 beyond the Deployment's revisionHistoryLimit are pruned. Others are left alone."""
    for rs in cluster.list_objects(REPLICASETS):
        meta = rs["metadata"]
        refs = [r for r in meta.get("ownerReferences") or [] if r.get("kind") == "Deployment"]
        if refs and not any(owned_by(rs, d) for d in every):
            with contextlib.suppress(ApiError):
                await cluster.delete_object(REPLICASETS, meta["namespace"], meta["name"])
            continue
        dep = next((d for d in deployments if owned_by(rs, d)), None)
        if dep is None:
            continue
        h = (meta.get("labels") or {}).get(HASH_LABEL)
        mine = [
            r for r in replicas if (r.namespace, r.deployment) == (meta["namespace"], dep["metadata"]["name"])
        ]
        own = [r for r in mine if r.template_hash == h]
        current = h == template_hash(dep["spec"].get("template", {}))
        # The current ReplicaSet asks for the Deployment's count once the rollout is over.
        want = int(dep["spec"].get("replicas", 1)) if current and len(own) == len(mine) else len(own)
        if rs["spec"].get("replicas") != want:
            rs = await cluster.patch_object(
                REPLICASETS, meta["namespace"], meta["name"], {"spec": {"replicas": want}}
            )
        alive = [r for r in own if r.state != "killed"]
        status = {
            "replicas": len(alive),
            "fullyLabeledReplicas": len(alive),
            "readyReplicas": sum(r.ready for r in alive),
            "availableReplicas": sum(r.ready for r in alive),
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        if status != rs.get("status"):
            await cluster.patch_object(
                REPLICASETS, meta["namespace"], meta["name"], {"status": status}, subresource="status"
            )
    for dep in deployments:
        await _prune(cluster, dep)


async def _prune(cluster: RegionCluster, dep: dict[str, Any]) -> None:
    ns = dep["metadata"]["namespace"]
    owned = [rs for rs in cluster.list_objects(REPLICASETS, ns) if owned_by(rs, dep)]
    current = f"{dep['metadata']['name']}-{template_hash(dep['spec'].get('template', {}))}"
    revision = revisions(owned)
    idle = sorted(
        (rs for rs in owned if rs["metadata"]["name"] != current and not rs["spec"].get("replicas")),
        key=lambda rs: revision[rs["metadata"]["name"]],
    )
    keep = int(dep["spec"].get("revisionHistoryLimit", 10))
    for rs in idle[: max(0, len(idle) - keep)]:
        with contextlib.suppress(ApiError):
            await cluster.delete_object(REPLICASETS, ns, rs["metadata"]["name"])
