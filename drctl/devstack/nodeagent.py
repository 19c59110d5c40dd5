"""The node agent: turns tracked Deployments into fleetsim processes and reports their status.

It plays kubelet, ReplicaSet, Deployment and HPA controllers at once, just enough for drctl:
- each pod template gets a ReplicaSet and each replica a Pod, published through the API
  (drctl/devstack/pods.py): `<deployment>-<pod-template-hash>-<5 characters>`, bound to this
  agent's node;
- a replica whose process dies is restarted in its pod, as the kubelet restarts a container
  (unless a fault keeps it down), on the same port: the agent holds each pod's port for the pod's
  life (`reserve_port`), as a pod keeps its IP across container restarts;
- a Pod deleted through the API is stopped and then removed, and a new Pod with a new name takes
  its place, as the ReplicaSet controller replaces it; scaling the Deployment is what keeps
  replicas away;
- replicas are replaced surge-style when the pod template changes;
- they are registered in the region gateway's `backend track_<track>` once they pass /health;
- Deployment status is written like the real controller's, and the EndpointSlices of the
  Services that select the pods are kept (drctl/devstack/endpointslices.py).

At about 500 lines it is over the house limit: reconcile, start, stop, probe and register share
one replica table and one event loop, and splitting them would pass that state around.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from drctl.devstack import pods, prometheus
from drctl.devstack.deployment_status import deployment_status, hpa_target
from drctl.devstack.endpointslices import SERVICES, PodEndpoint, publish
from drctl.devstack.haproxy_conf import track_backend
from drctl.devstack.kube import RegionCluster
from drctl.devstack.label_selector import ApiError
from drctl.providers.haproxy_runtime import HAProxyError, HAProxyRuntime

DEPLOYMENTS, HPAS = "apps/v1/deployments", "autoscaling/v2/horizontalpodautoscalers"
TRACK_LABEL = "drctl.io/track"
_CRASH_WINDOW_S = 10.0  # a replica dying sooner than this after start is restarted with backoff
TERMINATION_GRACE_S = 5.0  # in-flight requests of a stopped replica finish within this, as in a pod's grace


class GatewayHandle(Protocol):
    """What the agent needs from the supervised region gateway."""

    runtime: HAProxyRuntime
    epoch: int  # bumped on each HAProxy start: dynamic servers must be added again

    @property
    def usable(self) -> bool: ...


@dataclass
class Replica:
    pod: str
    namespace: str
    deployment: str
    track: str
    template_hash: str
    port: int
    proc: asyncio.subprocess.Process
    env: dict[str, str] = field(default_factory=dict)  # the process environment, kept for restarts
    started_at: float = field(default_factory=time.monotonic)
    created_at: float = field(default_factory=time.monotonic)
    state: str = "starting"  # starting | running | crashed | killed | frozen
    ready: bool = False
    stay_down: bool = False
    registered_epoch: int = -1
    faults_applied: bool = False
    health_failures: int = 0
    restarts: int = 0
    labels: dict[str, str] = field(default_factory=dict)  # the pod's, for Service selectors
    uid: str = ""  # the Pod object's
    status_memory: dict[str, str] = field(default_factory=dict)  # transition times of its pod status
    reservation: socket.socket | None = None  # holds `port` until the pod is gone (reserve_port)

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def describe(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "namespace": self.namespace,
            "deployment": self.deployment,
            "track": self.track,
            "port": self.port,
            "pid": self.proc.pid,
            "state": self.state,
        }


def die_with_parent() -> None:
    # PR_SET_PDEATHSIG: if the region process is SIGKILLed, its replicas do not linger as orphans.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def _template_hash(dep: dict[str, Any]) -> str:
    return pods.template_hash(dep["spec"].get("template", {}))


def reserve_port() -> socket.socket:
    """A loopback port held for one pod's life: bound, never listening, so connections to it are
    refused while no process of the pod listens (starting, loading, crashed), as a pod's address
    refuses them.

    Bound before SO_REUSEPORT is set, so no bind to port 0 (another pod's reservation, any other
    process) and no outgoing connection's source port can land on it; set afterwards, so the pod's
    fleetsim, which binds with SO_REUSEPORT, can listen on it. Picking a free port and closing it
    instead leaves it free until the process binds (a model load later): under load another
    replica was handed the same port, and one of the two crash-looped for good.
    """
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    except OSError:
        s.close()
        raise
    return s


class NodeAgent:
    def __init__(
        self,
        cluster: RegionCluster,
        region: str,
        gateway: GatewayHandle,
        state_dir: Path,
        observe_delay_s: float = 0.0,
        model_load_s: float = 0.0,
    ) -> None:
        self.cluster, self.region, self.gateway, self.state_dir = cluster, region, gateway, state_dir
        # Each replica keeps its port closed this long, as vLLM does while it loads weights: its pod
        # is not ready and its endpoint not ready meanwhile (a container's FLEETSIM_LOAD_S wins).
        self.model_load_s = model_load_s
        # The Deployment controller acts on a new spec this long after it changed (a real one
        # syncs from its informer's queue, later still under load): until then neither its pods
        # nor its status move, and status.observedGeneration lags metadata.generation.
        self.observe_delay_s = observe_delay_s
        self._generation_seen: dict[str, tuple[int, float]] = {}  # deployment -> (generation, when)
        self.replicas: dict[str, Replica] = {}  # by pod name
        self.terminating: dict[str, Replica] = {}  # stopped, until the process is gone (by pod name)
        self.inference_faults: dict[str, dict[str, Any]] = {}  # track or "*" -> fleetsim fault body
        self.node = f"devstack-{region}"  # the Node every published Pod is bound to
        self._hold_until: dict[str, float] = {}  # pod -> earliest restart (crash-loop backoff)
        self._crashes: dict[str, int] = {}
        self._progress: dict[str, dict[str, Any]] = {}  # deployment -> conditions memory
        self._stopping: set[asyncio.Task[None]] = set()
        self._last_health = 0.0
        self._session: aiohttp.ClientSession | None = None

    # --- the loop ---------------------------------------------------------------------------------

    async def run(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1.0))
        try:
            while True:
                self.cluster.changed.clear()
                try:
                    await self.reconcile()
                except Exception as exc:  # one bad object must not stop the whole region
                    print(f"node agent: reconcile failed: {exc!r}", file=sys.stderr, flush=True)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.cluster.changed.wait(), 0.2)
        finally:
            await self.shutdown()

    async def reconcile(self) -> None:
        self._reap()
        self._follow_pod_deletions()
        await self._restart_crashed()
        every = self.cluster.list_objects(DEPLOYMENTS)
        deployments = [d for d in every if TRACK_LABEL in (d["metadata"].get("labels") or {})]
        hpas = self.cluster.list_objects(HPAS)
        keys = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in deployments}
        for r in list(self.replicas.values()):
            if (r.namespace, r.deployment) not in keys:
                self._stop(r)
        await self._check_health()
        deployments = [d for d in deployments if self._observed(d)]
        for dep in deployments:
            target = hpa_target(dep, hpas)
            if target is not None and target != dep["spec"].get("replicas", 1):
                # As the HPA controller would: write the new count back to the Deployment's spec.
                await self.cluster.patch_object(
                    DEPLOYMENTS,
                    dep["metadata"]["namespace"],
                    dep["metadata"]["name"],
                    {"spec": {"replicas": target}},
                )
                continue
            await self._converge(dep)
        await self._register()
        await self._publish_pod_status()
        # Endpoints before status: whoever sees readyReplicas go up finds the new pods in the slices.
        await self._publish_endpoints()
        for dep in deployments:
            await self._write_status(dep, hpas)
        await pods.sync_replicasets(self.cluster, deployments, every, list(self.replicas.values()))
        self._write_state_file()

    def _observed(self, dep: dict[str, Any]) -> bool:
        """Whether the controller has seen `dep`'s current generation (observe_delay_s after it)."""
        meta = dep["metadata"]
        key, generation = f"{meta['namespace']}/{meta['name']}", int(meta.get("generation", 1))
        if int((dep.get("status") or {}).get("observedGeneration", 0)) >= generation:
            return True
        seen = self._generation_seen.get(key)
        if seen is None or seen[0] != generation:
            seen = self._generation_seen[key] = (generation, time.monotonic())
        return time.monotonic() - seen[1] >= self.observe_delay_s

    def _reap(self) -> None:
        now = time.monotonic()
        for r in list(self.replicas.values()):
            if r.proc.returncode is None or r.state == "crashed":
                continue
            if r.registered_epoch >= 0:
                self._unregister_later(r)
            if r.stay_down:
                r.state, r.ready = "killed", False
                continue
            # The container died: the kubelet restarts it in the same pod, with crash-loop backoff.
            r.state, r.ready = "crashed", False
            crashes = self._crashes.get(r.pod, 0) + 1 if now - r.started_at < _CRASH_WINDOW_S else 0
            self._crashes[r.pod] = crashes
            self._hold_until[r.pod] = now + min(10.0, 0.2 * 2 ** (crashes - 1)) if crashes > 1 else now

    def _follow_pod_deletions(self) -> None:
        """A pod deleted through the API (terminating, or gone if forced) is stopped, as the kubelet
        stops it; _converge then replaces it with a new pod, as its ReplicaSet would."""
        published = {
            (p["metadata"]["namespace"], p["metadata"]["name"]): p
            for p in self.cluster.list_objects(pods.PODS, field_selector=f"spec.nodeName={self.node}")
        }
        for r in list(self.replicas.values()):
            found = published.get((r.namespace, r.pod))
            if found is None or found["metadata"].get("deletionTimestamp"):
                self._stop(r)

    async def _restart_crashed(self) -> None:
        now = time.monotonic()
        for r in list(self.replicas.values()):
            if r.state == "crashed" and self._hold_until.get(r.pod, 0.0) <= now:
                r.proc = await self._start_process(r.pod, r.port, r.env)
                r.restarts += 1
                r.started_at, r.state, r.faults_applied, r.health_failures = now, "starting", False, 0

    async def _converge(self, dep: dict[str, Any]) -> None:
        ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
        desired, h = int(dep["spec"].get("replicas", 1)), _template_hash(dep)
        mine = sorted(
            (r for r in self.replicas.values() if (r.namespace, r.deployment) == (ns, name)), key=_age
        )
        current = [r for r in mine if r.template_hash == h]
        old = [r for r in mine if r.template_hash != h]
        # Scale down: drop the newest and least ready first.
        for r in sorted(current, key=lambda r: (r.ready, -r.created_at))[: max(0, len(current) - desired)]:
            self._stop(r)
        current = [r for r in current if r.pod in self.replicas]
        # Rolling update, maxSurge 1 / maxUnavailable 0: an old replica goes only once a new one is
        # ready to take its place (or the Deployment scaled to 0); stopping before spawning keeps
        # at most desired + 1 processes.
        ready_new = sum(1 for r in current if r.ready)
        for r in sorted(old, key=lambda r: (r.ready, r.created_at)):
            if ready_new + sum(1 for o in old if o.pod in self.replicas) <= desired and desired > 0:
                break
            self._stop(r)
        missing = desired - len(current)
        if any(o.pod in self.replicas for o in old) and missing > 0:
            missing = 0 if any(r.state == "starting" for r in current) else 1
        for _ in range(max(0, missing)):
            if not await self._spawn(dep, h):
                break

    async def _spawn(self, dep: dict[str, Any], h: str) -> bool:
        ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
        rs = await self._replicaset(dep, h)
        reservation = reserve_port()
        port = int(reservation.getsockname()[1])
        # The ReplicaSet controller creates the pod; the server names it from generateName.
        try:
            created = await self.cluster.create_object(pods.PODS, pods.pod(rs, self.node, port), namespace=ns)
        except BaseException:
            reservation.close()
            raise
        pod = created["metadata"]["name"]
        container = ((dep["spec"].get("template") or {}).get("spec") or {}).get("containers", [{}])[0]
        image = container.get("image", "")
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else "latest"
        track = dep["metadata"]["labels"][TRACK_LABEL]
        env = {
            **os.environ,
            "FLEETSIM_LOAD_S": f"{self.model_load_s:g}",
            **{e["name"]: str(e.get("value", "")) for e in container.get("env") or [] if "name" in e},
        }
        env.update(
            FLEETSIM_REGION=self.region, FLEETSIM_TRACK=track, FLEETSIM_REPLICA=pod, FLEETSIM_VERSION=tag
        )
        self.replicas[pod] = Replica(
            pod=pod,
            namespace=ns,
            deployment=name,
            track=track,
            template_hash=h,
            port=port,
            proc=await self._start_process(pod, port, env),
            env=env,
            labels=dict(created["metadata"].get("labels") or {}),
            uid=created["metadata"]["uid"],
            reservation=reservation,
        )
        return True

    async def _start_process(self, pod: str, port: int, env: dict[str, str]) -> asyncio.subprocess.Process:
        log_dir = self.state_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        with await asyncio.to_thread(open, log_dir / f"fleetsim-{self.region}-{pod}.log", "ab") as log:
            return await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "drctl.devstack.fleetsim",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                preexec_fn=die_with_parent,
            )

    async def _replicaset(self, dep: dict[str, Any], h: str) -> dict[str, Any]:
        """The ReplicaSet of `dep`'s template `h`, created (at the next revision) if missing."""
        ns = dep["metadata"]["namespace"]
        found = self.cluster.find(pods.REPLICASETS, ns, f"{dep['metadata']['name']}-{h}")
        if found is not None:
            return found
        owned = [rs for rs in self.cluster.list_objects(pods.REPLICASETS, ns) if pods.owned_by(rs, dep)]
        revision = max(pods.revisions(owned).values(), default=0) + 1
        return await self.cluster.create_object(pods.REPLICASETS, pods.replicaset(dep, h, 0, revision))

    def _stop(self, r: Replica) -> None:
        self.replicas.pop(r.pod, None)
        self.terminating[r.pod] = r
        task = asyncio.create_task(self._terminate(r))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def _terminate(self, r: Replica) -> None:
        # The ReplicaSet controller deletes the pod (graceful: it stays, terminating, while the
        # kubelet stops it), then the kubelet removes it once the process is gone.
        with contextlib.suppress(ApiError):
            await self.cluster.delete_object(pods.PODS, r.namespace, r.pod)
        if r.registered_epoch >= 0 and self.gateway.usable:
            # As a gateway does when the endpoint goes: no new request, and the ones in flight
            # finish within the pod's grace before the kubelet signals the process.
            with contextlib.suppress(HAProxyError):
                await asyncio.to_thread(
                    self.gateway.runtime.del_server,
                    track_backend(r.track),
                    r.pod,
                    grace_s=TERMINATION_GRACE_S,
                    missing_ok=True,
                )
        if r.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                r.proc.send_signal(signal.SIGCONT)
                r.proc.terminate()
            try:
                await asyncio.wait_for(r.proc.wait(), 3.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    r.proc.kill()
                await r.proc.wait()
        _release(r)
        with contextlib.suppress(ApiError):
            await self.cluster.delete_object(pods.PODS, r.namespace, r.pod, grace_period_s=0)
        if self.terminating.get(r.pod) is r:
            del self.terminating[r.pod]
            self.cluster.changed.set()  # its endpoint goes from the slice on the next pass

    def _unregister_later(self, r: Replica) -> None:
        epoch, r.registered_epoch = r.registered_epoch, -1
        if epoch != self.gateway.epoch or not self.gateway.usable:
            return  # that HAProxy is gone, and its dynamic servers with it

        async def unregister() -> None:
            with contextlib.suppress(HAProxyError):
                await asyncio.to_thread(
                    self.gateway.runtime.del_server, track_backend(r.track), r.pod, missing_ok=True
                )

        task = asyncio.create_task(unregister())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    # --- readiness, faults, registration ----------------------------------------------------------

    async def _check_health(self) -> None:
        now = time.monotonic()
        recheck_running = now - self._last_health >= 1.0
        if recheck_running:
            self._last_health = now
        todo = [
            r
            for r in self.replicas.values()
            if r.state == "starting" or (r.state == "running" and recheck_running)
        ]
        await asyncio.gather(*(self._probe(r) for r in todo))

    async def _probe(self, r: Replica) -> None:
        assert self._session is not None
        base = f"http://127.0.0.1:{r.port}"
        try:
            if not r.faults_applied:
                # Faults go on before readiness, so a replica started during an inference fault
                # never serves a healthy request it should not.
                fault = self.fault_for(r.track)
                async with self._session.post(f"{base}/admin/fault", json=fault) if fault else \
                        self._session.get(f"{base}/admin/fault") as resp:  # fmt: skip
                    if resp.status != 200:
                        return
                r.faults_applied = True
            async with self._session.get(f"{base}/health") as resp:
                ok = resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        if r.proc.returncode is not None or r.state not in ("starting", "running"):
            return  # killed or frozen while we were asking
        if ok:
            r.ready, r.state, r.health_failures = True, "running", 0
        elif r.state == "running":
            r.health_failures += 1
            r.ready = r.health_failures < 2  # like failureThreshold: one blip is not unready

    def fault_for(self, track: str) -> dict[str, Any]:
        return {**self.inference_faults.get("*", {}), **self.inference_faults.get(track, {})}

    async def _register(self) -> None:
        if not self.gateway.usable:
            return
        epoch = self.gateway.epoch
        for r in list(self.replicas.values()):
            if r.ready and r.state == "running" and r.registered_epoch != epoch:
                try:
                    await asyncio.to_thread(self._add_server, r)
                    r.registered_epoch = epoch
                except HAProxyError as exc:
                    print(f"node agent: cannot register {r.pod}: {exc}", file=sys.stderr, flush=True)

    def _add_server(self, r: Replica) -> None:
        backend = track_backend(r.track)
        # A server of that name may be left from a replica that died before it was removed.
        self.gateway.runtime.del_server(backend, r.pod, missing_ok=True)
        self.gateway.runtime.add_server(backend, r.pod, "127.0.0.1", r.port, check=True)

    # --- status -----------------------------------------------------------------------------------

    async def _write_status(self, dep: dict[str, Any], hpas: list[dict[str, Any]]) -> None:
        ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
        mine = [r for r in self.replicas.values() if (r.namespace, r.deployment) == (ns, name)]
        memory = self._progress.setdefault(f"{ns}/{name}", {})
        status = deployment_status(dep, mine, _template_hash(dep), memory)
        if status != dep.get("status"):
            with contextlib.suppress(Exception):  # deleted meanwhile: nothing to report on
                await self.cluster.patch_object(
                    DEPLOYMENTS, ns, name, {"status": status}, subresource="status"
                )
        for hpa in hpas:
            ref = hpa["spec"].get("scaleTargetRef") or {}
            if hpa["metadata"].get("namespace") == ns and ref.get("name") == name:
                hs = {
                    "currentReplicas": status["replicas"],
                    "desiredReplicas": int(dep["spec"].get("replicas", 1)),
                }
                if {k: (hpa.get("status") or {}).get(k) for k in hs} != hs:
                    await self.cluster.patch_object(
                        HPAS, ns, hpa["metadata"]["name"], {"status": hs}, subresource="status"
                    )

    async def _publish_pod_status(self) -> None:
        """The kubelet's part: each pod's status follows its process (phase, Ready, restarts)."""
        for r in [*self.replicas.values(), *self.terminating.values()]:
            current = self.cluster.find(pods.PODS, r.namespace, r.pod)
            if current is None:
                continue
            status = pods.pod_status(r, current, r.status_memory)
            if status != current.get("status"):
                with contextlib.suppress(ApiError):  # deleted meanwhile
                    await self.cluster.patch_object(
                        pods.PODS, r.namespace, r.pod, {"status": status}, subresource="status"
                    )

    async def _publish_endpoints(self) -> None:
        # As the kubelet reports it: a killed or frozen pod stays, not ready, until it is deleted;
        # a stopped one is terminating (serving while still ready) until its process is gone.
        pods = [
            PodEndpoint(
                name=r.pod,
                namespace=r.namespace,
                port=r.port,
                ready=r.ready,
                labels=r.labels,
                uid=r.uid,
                terminating=terminating,
            )
            for terminating, group in ((False, self.replicas), (True, self.terminating))
            for r in group.values()
        ]
        await publish(self.cluster, self.cluster.list_objects(SERVICES), pods)

    def _write_state_file(self) -> None:
        data = {
            "region": self.region,
            "gateway_pid": getattr(self.gateway, "pid", None),
            "replicas": [r.describe() for r in sorted(self.replicas.values(), key=_age)],
        }
        path = self.state_dir / f"replicas-{self.region}.json"
        text = json.dumps(data, indent=1)
        if not path.exists() or path.read_text() != text:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(path)
        # The dev stack's Prometheus scrapes every replica through this file_sd file.
        prometheus.write_targets(
            prometheus.targets_dir(self.state_dir) / f"fleetsim-{self.region}.json",
            prometheus.replica_targets(self.region, [r.describe() for r in self.replicas.values()]),
        )

    async def shutdown(self) -> None:
        for r in list(self.replicas.values()):
            with contextlib.suppress(ProcessLookupError):
                r.proc.kill()  # the gateway goes down with us, so no need to deregister
        for r in list(self.replicas.values()):
            await r.proc.wait()
            _release(r)
        self.replicas.clear()
        for task in list(self._stopping):
            task.cancel()
        if self._session is not None:
            await self._session.close()


def _release(r: Replica) -> None:
    """The pod is gone: its port may go to another."""
    if r.reservation is not None:
        r.reservation.close()
        r.reservation = None


def _age(r: Replica) -> float:
    return r.created_at
