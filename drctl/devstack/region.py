"""One emulated region: `python -m drctl.devstack.region --config CFG --region NAME`.

Serves the region's Kubernetes API on regions[].kube.api_url and its admin API on
regions[].devstack_admin_url, supervises the region gateway HAProxy, seeds the cluster and runs the
node agent. On SIGTERM it kills every child (gateway and replicas) and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path

from drctl.config.schema import (
    TRACKS,
    ConfigError,
    DevStackConfig,
    FleetConfig,
    GatewayApiRegional,
    load_config,
)
from drctl.devstack.admin import RegionAdmin, start_admin
from drctl.devstack.control_plane import ControlPlane
from drctl.devstack.gateway_controller import ROUTES, GatewayController, gateway_name, haproxy_program
from drctl.devstack.haproxy_conf import (
    fresh_state_file,
    haproxy_dir,
    host_port,
    partition_acl,
    region_backend,
    region_socket,
    render_region,
    save_state,
    state_file,
)
from drctl.devstack.kube import RegionCluster, serve_cluster
from drctl.devstack.nodeagent import DEPLOYMENTS, HPAS, TRACK_LABEL, NodeAgent, die_with_parent
from drctl.devstack.velero_agent import run_velero_agent
from drctl.providers.haproxy_runtime import HAProxyError, HAProxyRuntime


class Gateway:
    """The region gateway HAProxy: started, restarted when it dies, and faulted on request."""

    def __init__(self, cfg: FleetConfig, region: str) -> None:
        self.region = region
        self.config_path = haproxy_dir(cfg) / f"{region}.cfg"
        self.log_path = cfg.state_dir() / "logs" / f"haproxy-{region}.log"
        self.runtime = HAProxyRuntime(region_socket(cfg, cfg.region(region)))
        self.backend = region_backend(cfg)
        self.proc: asyncio.subprocess.Process | None = None
        self.epoch = 0
        self.fault: str | None = None  # None | "killed" | "frozen"
        self.state_path = state_file(cfg, region)  # `show servers state`, read back on a restart
        self.partition_path = partition_acl(cfg, region)
        self.partitioned: list[str] = []  # source addresses whose connections are refused
        self._started_at = 0.0
        # One start at a time. A restore and the supervisor's restart once raced: both spawned an
        # HAProxy, the second failed on the abns@ track sockets the first held, and its exit left
        # the runtime socket path dead, so the replicas never joined the one that served.
        self._starting = asyncio.Lock()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    @property
    def usable(self) -> bool:
        return self.alive and self.fault is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.returncode is None else None

    async def start(self) -> None:
        async with self._starting:
            if not self.alive:
                await self._spawn()

    async def _spawn(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with await asyncio.to_thread(open, self.log_path, "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                "haproxy",
                "-db",
                "-f",
                str(self.config_path),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
        self._started_at = time.monotonic()
        for _ in range(100):  # up to ~5 s for the runtime socket
            if self.proc.returncode is not None:
                return
            try:
                await asyncio.to_thread(self.runtime.command, "show info")
                break
            except HAProxyError:
                await asyncio.sleep(0.05)
        # The track weights drctl set come back from the server-state file HAProxy loaded, as they
        # do for a production gateway; nothing here sets them again.
        self.epoch += 1

    async def supervise(self) -> None:
        last_snapshot = 0.0
        while True:
            await asyncio.sleep(0.2)
            code = self.proc.returncode if self.proc is not None else None
            if code is not None and self.fault != "killed" and not self._starting.locked():
                # A crash loop (e.g. port taken) retries every few seconds rather than spinning.
                if time.monotonic() - self._started_at > 2.0:
                    print(
                        f"region gateway exited {code}; restarting",
                        file=sys.stderr,
                        flush=True,
                    )
                    await self.start()
            elif self.usable and time.monotonic() - last_snapshot > 1.0:
                # What a production gateway's reload does before it restarts, done every second here
                # because the dev stack's faults kill the gateway without warning.
                last_snapshot = time.monotonic()
                await self.save_state()

    async def save_state(self) -> None:
        """Write the region backend's `show servers state` to the gateway's server-state file."""
        with contextlib.suppress(HAProxyError, OSError):
            state = await asyncio.to_thread(self.runtime.command, f"show servers state {self.backend}")
            await asyncio.to_thread(save_state, state, self.state_path)

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    async def kill(self) -> None:
        self.fault = "killed"
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            await self.proc.wait()

    async def freeze(self) -> None:
        self.fault = "frozen"
        self._signal(signal.SIGSTOP)

    async def thaw(self) -> None:
        self._signal(signal.SIGCONT)
        if self.fault == "frozen":
            self.fault = None

    async def restore(self) -> None:
        self._signal(signal.SIGCONT)
        self.fault = None
        await self.start()

    async def partition(self, sources: list[str]) -> None:
        """Refuse new connections from these source addresses; [] heals the partition.

        The file is what a restarted HAProxy loads; the runtime API changes the running one.
        """
        self.partitioned = sorted(set(sources))
        await asyncio.to_thread(self.partition_path.write_text, "".join(f"{a}\n" for a in self.partitioned))
        if self.usable:
            path = self.partition_path
            await asyncio.to_thread(
                self.runtime.commands,
                [f"clear acl {path}", *(f"add acl {path} {a}" for a in self.partitioned)],
            )

    async def stop(self) -> None:
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            await self.proc.wait()


async def seed(cluster: RegionCluster, cfg: FleetConfig, region: str) -> None:
    """The objects a freshly provisioned region has (docs/devstack.md, "Emulated cluster")."""
    r = cfg.region(region)
    ns, app, w = r.kube.namespace, cfg.workload.app, cfg.workload
    name = w.deployment_name("stable")
    labels = {"app": app, TRACK_LABEL: "stable"}
    for namespace in {ns, cfg.backup.namespace}:
        await cluster.ensure("v1/namespaces", {"metadata": {"name": namespace}})
    await cluster.ensure(
        DEPLOYMENTS,
        {
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "replicas": r.replicas,
                "selector": {"matchLabels": labels},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "server",
                                "image": w.image,
                                "ports": [{"containerPort": w.container_port}],
                                "env": [{"name": "FLEETSIM_MODEL", "value": w.model}],
                            }
                        ]
                    },
                },
            },
        },
    )
    await cluster.ensure(
        "v1/services",
        {
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "selector": labels,
                "ports": [{"name": "http", "port": 80, "targetPort": w.container_port}],
            },
        },
    )
    await cluster.ensure(
        HPAS,
        {
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": r.replicas,
                "maxReplicas": max(r.max_replicas, r.replicas),
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 80},
                        },
                    }
                ],
            },
        },
    )
    # The route refers to stable only: a backendRef to a track's Service that does not exist is an
    # error its controller reports (ResolvedRefs False); drctl adds a track's ref when it deploys it.
    # Attached to the region's Gateway only when the regional tier is the Gateway API: then the
    # gateway controller programs the region gateway from it; detached, nothing acts on it.
    gateway_tier = isinstance(cfg.traffic.regional_tier, GatewayApiRegional)
    await cluster.ensure(
        ROUTES,
        {
            "metadata": {"name": app, "namespace": ns, "labels": {"app": app}},
            "spec": {
                **({"parentRefs": [{"name": gateway_name(region)}]} if gateway_tier else {}),
                "rules": [{"backendRefs": [{"name": name, "port": 80, "weight": 100}]}],
            },
        },
    )
    await cluster.ensure(
        "velero.io/v1/backupstoragelocations",
        {
            "metadata": {"name": cfg.backup.storage_location, "namespace": cfg.backup.namespace},
            "spec": {
                "provider": "aws",
                "default": True,
                "objectStorage": {"bucket": cfg.backup.bucket},
                "config": {
                    "region": cfg.aws.region,
                    "s3ForcePathStyle": "true",
                    **({"s3Url": cfg.aws.endpoint_url} if cfg.aws.endpoint_url else {}),
                },
            },
            "status": {"phase": "Available"},
        },
    )


async def run_region(cfg: FleetConfig, region: str) -> None:
    r = cfg.region(region)
    if not r.kube.api_url or not r.devstack_admin_url:
        raise SystemExit(f"region {region}: the dev stack needs kube.api_url and devstack_admin_url")
    state = cfg.state_dir()
    haproxy_dir(cfg).mkdir(parents=True, exist_ok=True)
    (haproxy_dir(cfg) / f"{region}.cfg").write_text(render_region(cfg, region))
    partition_acl(cfg, region).write_text("")  # no partition at start; HAProxy needs the file to exist
    fresh_state_file(state_file(cfg, region))  # a region starts from the config's track weights
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    kube_host, kube_port = host_port(r.kube.api_url)
    admin_host, admin_port = host_port(r.devstack_admin_url)
    async with serve_cluster(kube_host, kube_port) as cluster:
        await seed(cluster, cfg, region)
        gateway = Gateway(cfg, region)
        dev = cfg.devstack or DevStackConfig()
        agent = NodeAgent(
            cluster,
            region,
            gateway,
            state,
            observe_delay_s=dev.deployment_sync_delay_s,
            model_load_s=dev.model_load_s,
        )

        routes = GatewayController(
            cluster,
            gateway_name(region),
            dev.route_sync_delay_s,
            data_plane=(r.kube.namespace, cfg.workload.app),
            program=haproxy_program(gateway, gateway.backend),
            track_of={cfg.workload.deployment_name(t): t for t in TRACKS},
        )
        runner = None
        try:
            await gateway.start()
            # The region hosts drctl's control plane too: its admin API can stop Temporal and its worker.
            control = ControlPlane(cfg, Path(cfg.source_path), region) if cfg.source_path else None
            runner = await start_admin(RegionAdmin(agent, gateway, control), admin_host, admin_port)
            tasks = [
                asyncio.create_task(agent.run()),
                asyncio.create_task(gateway.supervise()),
                asyncio.create_task(routes.run()),
                asyncio.create_task(run_velero_agent(cfg, region)),
            ]
            print(
                f"region {region}: kube {r.kube.api_url}, admin {r.devstack_admin_url}, "
                f"gateway {r.gateway_url}",
                flush=True,
            )
            stopper = asyncio.create_task(stop.wait())
            done, _ = await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for task in [stopper, *tasks]:
                task.cancel()
            await asyncio.gather(stopper, *tasks, return_exceptions=True)
            for task in done - {stopper}:
                if task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        finally:
            await agent.shutdown()
            await gateway.stop()
            if runner is not None:
                await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m drctl.devstack.region", description=__doc__)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--region", required=True)
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
        cfg.region(args.region)
    except (ConfigError, ValueError) as exc:
        print(f"region: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    asyncio.run(run_region(cfg, args.region))


if __name__ == "__main__":
    main()
