"""The region admin API (dev stack only): replica listing and fault injection on real processes.

Faults are real: SIGKILL, SIGSTOP and SIGCONT on fleetsim replicas and on the region gateway
HAProxy, and fleetsim's own /admin/fault for inference faults. See docs/devstack.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any, Literal, Protocol

import aiohttp
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, IPvAnyAddress, ValidationError

from drctl.devstack.control_plane import ControlPlane
from drctl.devstack.nodeagent import NodeAgent, Replica


class GatewayFaults(Protocol):
    fault: str | None
    partitioned: list[str]

    async def kill(self) -> None: ...
    async def freeze(self) -> None: ...
    async def thaw(self) -> None: ...
    async def restore(self) -> None: ...
    async def partition(self, sources: list[str]) -> None: ...


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # The drill workflow that injects the fault; listed by GET /faults so a sweep can clear faults
    # whose drill is gone (a Kubernetes fault carries the same marker as an annotation).
    owner: str | None = None


class ReplicaFault(_Body):
    action: Literal["kill", "freeze", "thaw"]
    track: str | None = None
    deployment: str | None = None
    count: int | None = Field(None, ge=1)
    stay_down: bool = False


class GatewayFault(_Body):
    action: Literal["kill", "freeze", "thaw", "restore"]


class PartitionFault(_Body):
    # Clients connecting from these addresses are refused by the region gateway, as by a firewall
    # between them and the region: the dev stack's network partition (a worker whose probes leave
    # from one, health.probe_source_address, loses its view of the region). [] heals it.
    sources: list[IPvAnyAddress] = Field(max_length=16)


class ControlPlaneFault(_Body):
    # The dev stack's Temporal server, or this region's own worker, stopped until /faults/clear:
    # the region took drctl's control plane down with it (drctl/devstack/control_plane.py).
    action: Literal["stop"]
    component: Literal["temporal", "worker"]


class InferenceFault(_Body):
    track: str | None = None
    down: bool | None = None
    error_rate: float | None = Field(None, ge=0, le=1)
    added_latency_ms: float | None = Field(None, ge=0)
    hang: bool | None = None


class RegionAdmin:
    def __init__(
        self, agent: NodeAgent, gateway: GatewayFaults, control_plane: ControlPlane | None = None
    ) -> None:
        self.agent, self.gateway, self.control_plane = agent, gateway, control_plane
        self.owners: set[str] = set()

    def _own(self, body: _Body) -> None:
        if body.owner:
            self.owners.add(body.owner)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[_errors])
        app.router.add_get("/replicas", self.replicas)
        app.router.add_get("/faults", self.faults)
        app.router.add_post("/faults/replicas", self.fault_replicas)
        app.router.add_post("/faults/gateway", self.fault_gateway)
        app.router.add_post("/faults/inference", self.fault_inference)
        app.router.add_post("/faults/partition", self.fault_partition)
        app.router.add_post("/faults/control-plane", self.fault_control_plane)
        app.router.add_post("/faults/clear", self.clear)
        return app

    async def replicas(self, _request: web.Request) -> web.Response:
        return web.json_response(
            [r.describe() for r in sorted(self.agent.replicas.values(), key=lambda r: r.pod)]
        )

    async def faults(self, _request: web.Request) -> web.Response:
        held = [
            {"pod": r.pod, "track": r.track, "state": r.state, "stay_down": r.stay_down}
            for r in sorted(self.agent.replicas.values(), key=lambda r: r.pod)
            if r.stay_down or r.state == "frozen"
        ]
        return web.json_response(
            {
                "replicas": held,
                "gateway": self.gateway.fault,
                "inference": self.agent.inference_faults,
                "partitioned": self.gateway.partitioned,
                "control_plane": list(self.control_plane.stopped) if self.control_plane else [],
                "owners": sorted(self.owners),
            }
        )

    async def fault_replicas(self, request: web.Request) -> web.Response:
        body = ReplicaFault.model_validate(await request.json())
        wanted = {
            "kill": ("starting", "running", "frozen"),
            "freeze": ("starting", "running"),
            "thaw": ("frozen",),
        }
        targets = [
            r
            for r in sorted(self.agent.replicas.values(), key=lambda r: r.pod)
            if r.state in wanted[body.action]
            and r.proc.returncode is None
            and body.track in (None, r.track)
            and body.deployment in (None, r.deployment)
        ]
        targets = targets[: body.count] if body.count is not None else targets
        if body.stay_down or body.action == "freeze":
            self._own(body)
        for r in targets:
            _signal_replica(r, body.action, body.stay_down)
        return web.json_response({"affected": [r.pod for r in targets]})

    async def fault_gateway(self, request: web.Request) -> web.Response:
        body = GatewayFault.model_validate(await request.json())
        self._own(body)
        await getattr(self.gateway, body.action)()
        return web.json_response({"gateway": self.gateway.fault})

    async def fault_partition(self, request: web.Request) -> web.Response:
        body = PartitionFault.model_validate(await request.json())
        self._own(body)
        await self.gateway.partition([str(a) for a in body.sources])
        return web.json_response({"partitioned": self.gateway.partitioned})

    async def fault_control_plane(self, request: web.Request) -> web.Response:
        body = ControlPlaneFault.model_validate(await request.json())
        if self.control_plane is None:
            return web.json_response({"error": "this region runs no control plane to stop"}, status=409)
        self._own(body)
        return web.json_response({"affected": await self.control_plane.stop(body.component)})

    async def fault_inference(self, request: web.Request) -> web.Response:
        body = InferenceFault.model_validate(await request.json())
        self._own(body)
        fault = body.model_dump(exclude_none=True, exclude={"track", "owner"})
        key = body.track or "*"
        self.agent.inference_faults[key] = {**self.agent.inference_faults.get(key, {}), **fault}
        targets = [
            r
            for r in self.agent.replicas.values()
            if body.track in (None, r.track) and r.state in ("starting", "running") and r.faults_applied
        ]
        # Replicas not yet reached get the fault from the agent before they are marked ready.
        await asyncio.gather(*(_fleetsim_fault(r, "POST", fault) for r in targets))
        return web.json_response({"affected": sorted(r.pod for r in targets)})

    async def clear(self, _request: web.Request) -> web.Response:
        for r in list(self.agent.replicas.values()):
            if r.state == "frozen":
                _signal_replica(r, "thaw", False)
            r.stay_down = False  # the agent restarts the ones that were kept down
        self.agent.inference_faults.clear()
        live = [r for r in self.agent.replicas.values() if r.proc.returncode is None and r.faults_applied]
        await asyncio.gather(*(_fleetsim_fault(r, "DELETE", None) for r in live))
        await self.gateway.restore()
        await self.gateway.partition([])
        # Last, and waited for: the fleet serves again before its control plane is back, as after
        # a real region loss, and the caller sees the clear done only once Temporal and the worker are.
        restarted = await self.control_plane.restore() if self.control_plane else []
        self.owners.clear()
        return web.json_response({"cleared": True, "restarted": restarted})


def _signal_replica(r: Replica, action: str, stay_down: bool) -> None:
    sig = {"kill": signal.SIGKILL, "freeze": signal.SIGSTOP, "thaw": signal.SIGCONT}[action]
    with contextlib.suppress(ProcessLookupError):
        os.kill(r.proc.pid, sig)
    if action == "kill":
        r.state, r.ready, r.stay_down = "killed", False, stay_down
    elif action == "freeze":
        r.state, r.ready = "frozen", False
    else:
        # Readiness is proven again by /health before it counts as ready.
        r.state, r.ready = "starting", False


async def _fleetsim_fault(r: Replica, method: str, body: dict[str, Any] | None) -> None:
    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0)) as s:
            async with s.request(method, f"http://127.0.0.1:{r.port}/admin/fault", json=body):
                pass


@web.middleware
async def _errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()]
        return web.json_response({"error": "; ".join(problems)}, status=400)
    except ValueError as exc:  # not JSON at all
        return web.json_response({"error": f"invalid JSON body: {exc}"}, status=400)


async def start_admin(admin: RegionAdmin, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(admin.app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
