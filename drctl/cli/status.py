"""`drctl status`: per region the monitor's state, fresh probe figures, global weight, replicas; plus
running operations. Each source is read independently, so one unreachable piece shows as an error
in its cell instead of hiding the rest.
"""

from __future__ import annotations

import asyncio
from typing import Any

import typer
from rich.table import Table

from drctl.cli import common
from drctl.config.schema import FleetConfig


def _short(exc: object) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:120]


async def collect(cfg: FleetConfig) -> dict[str, Any]:
    from drctl.cli.monitor import monitor_status
    from drctl.client.connection import connect
    from drctl.client.operations import list_operations, visibility_query
    from drctl.providers.kubernetes import KubernetesPlatform
    from drctl.providers.probe import InferenceProber
    from drctl.providers.traffic_factory import global_traffic

    out: dict[str, Any] = {
        "fleet": cfg.name,
        "regions": {r.name: {"configured_weight": r.weight} for r in cfg.regions},
    }

    def weights() -> dict[str, int]:
        return global_traffic(cfg).get_weights()

    def replicas(region: str) -> dict[str, int]:
        d = KubernetesPlatform(cfg.region(region)).get_deployment(cfg.workload.deployment_name("stable"))
        return {"replicas": d.replicas, "ready": d.ready_replicas}

    async def temporal() -> tuple[Any, Any]:
        client = await connect(cfg)
        return await monitor_status(client, cfg), await list_operations(
            client, cfg.name, visibility_query(cfg.name), cfg
        )

    from drctl.cli import data_status

    tasks = [
        asyncio.to_thread(weights),
        InferenceProber(cfg).probe_regions(cfg.region_names),
        temporal(),
        data_status.collect(cfg),
        *(asyncio.to_thread(replicas, r) for r in cfg.region_names),
    ]
    w, probes, tmp, data, *reps = await asyncio.gather(*tasks, return_exceptions=True)
    out.update(data if isinstance(data, dict) else {"data_error": _short(data)})
    for i, name in enumerate(cfg.region_names):
        reg = out["regions"][name]
        reg["weight"] = w.get(name) if isinstance(w, dict) else None
        reg["replicas"] = reps[i] if isinstance(reps[i], dict) else {"error": _short(reps[i])}
        if isinstance(probes, list):
            p = probes[i]
            reg["probe"] = {
                "status": p.status.value,
                "reason": p.reason,
                "ttft_p50_ms": p.ttft_p50_ms,
                "failing_fraction": p.failing_fraction,
                "duration_ms": p.duration_ms,
            }
    if not isinstance(w, dict):
        out["weights_error"] = _short(w)
    if not isinstance(probes, list):
        out["probe_error"] = _short(probes)
    if isinstance(tmp, tuple):
        mon, ops = tmp
        out["monitor"] = {
            "running": mon is not None,
            "policy": mon.policy if mon else None,
            "alert": mon.alert if mon else None,
            "paused": mon.paused if mon else None,
        }
        for name in cfg.region_names:
            out["regions"][name]["state"] = (
                mon.regions[name].state.value if mon and name in mon.regions else None
            )
        out["operations"] = [o.model_dump(mode="json") for o in ops]
    else:
        out["temporal_error"] = _short(tmp)
    return out


app = typer.Typer()


@app.command("status")
def status(config: common.ConfigOpt = common.CONFIG, output: common.OutputOpt = common.TABLE) -> None:
    """The fleet now: region states, probe figures, global weights, replicas, running operations."""
    cfg = common.load(config)
    data = common.run_async(lambda: collect(cfg))
    if common.printed_json(output, data):
        return
    mon = data.get("monitor") or {}
    if mon.get("alert"):
        common.console.print(f"[bold red]ALERT {mon['alert']}[/]")
    t = Table(
        title=f"fleet {cfg.name}"
        + (f" (monitor: {mon.get('policy')})" if mon.get("running") else " (monitor not running)")
    )
    for col in ("region", "state", "probe", "TTFT p50", "weight", "config", "replicas"):
        t.add_column(col, no_wrap=True)
    reasons = []
    for name, r in data["regions"].items():
        p = r.get("probe") or {}
        rep = r.get("replicas") or {}
        # Long texts (probe reasons, API errors) go under the table so the columns stay readable.
        if p.get("reason"):
            reasons.append(f"{name}: {p['reason']}")
        if "replicas" not in rep and rep.get("error"):
            reasons.append(f"{name} replicas: {rep['error']}")
        t.add_row(
            name,
            r.get("state") or "-",
            p.get("status", "-"),
            f"{p['ttft_p50_ms']:.0f} ms" if p.get("ttft_p50_ms") is not None else "-",
            str(r.get("weight", "-")),
            str(r["configured_weight"]),
            f"{rep['ready']}/{rep['replicas']} ready" if "replicas" in rep else "unknown",
        )
    common.console.print(t)
    for line in reasons:
        common.console.print(f"  {line}", markup=False, highlight=False)
    for key in ("weights_error", "probe_error", "temporal_error", "data_error"):
        if key in data:
            common.console.print(f"[yellow]{key.replace('_', ' ')}:[/] {data[key]}")
    from drctl.cli import data_status

    data_status.render(data)
    ops = data.get("operations") or []
    if ops:
        common.console.print("running operations:")
        for o in ops:
            common.console.print(
                f"  {o['workflow_id']} ({o['operation']}, phase {o.get('phase')}) {o.get('ui_link') or ''}"
            )
    elif "operations" in data:
        common.console.print("no running operations")
