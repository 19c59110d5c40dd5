"""`drctl status`: per region the monitor's state, fresh probe figures, global weight, replicas; the
data picture; running operations. Exits 0 when the fleet is as configured or failed over on purpose
(drctl/cli/failed_over.py), 1 when it is not as it should be (docs/operations.md).

Temporal is all the CLI talks to: the monitor and the operations come from Temporal itself, and the
infrastructure is read by the workers (one FleetRead, drctl/client/reads.py). Each part is read
independently, so a region without a worker shows as "no worker polling <queue>" in its cell while
the rest of the fleet is shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from drctl.cli import common
from drctl.cli.durations import seconds
from drctl.cli.failed_over import failed_over

# The models and the Temporal client load when the command runs, not for -h or Tab completion.
if TYPE_CHECKING:
    from rich.console import RenderableType

    from drctl.config.schema import FleetConfig
    from drctl.models.reads import ReadResult

EXIT_OK, EXIT_UNHEALTHY, EXIT_UNREAD = 0, 1, 3
# A read that is refreshed (`--watch`) gets at most this long each time.
READ_TIMEOUT_S = 30.0


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]


def _part_error(res: ReadResult, key: str) -> str | None:
    part = res.parts.get(key)
    return part.error if part is not None else None


def _regions(cfg: FleetConfig, res: ReadResult, out: dict[str, Any]) -> None:
    from drctl.models.activity_io import Capacity, ProbeBatch, Weights

    weights = res.value("weights")
    batch = ProbeBatch.model_validate(res.value("probes")) if res.value("probes") is not None else None
    probes = {p.region: p for p in batch.probes} if batch else {}
    for name in cfg.region_names:
        reg = out["regions"][name]
        reg["weight"] = Weights.model_validate(weights).weights.get(name) if weights is not None else None
        cap = res.value(f"capacity/{name}")
        if cap is not None:
            c = Capacity.model_validate(cap)
            reg["replicas"] = {"replicas": c.replicas, "ready": c.ready_replicas}
        else:
            reg["replicas"] = {
                "error": _part_error(res, f"capacity/{name}") or out.get("read_error") or "not read"
            }
        p = probes.get(name)
        if p is not None:
            reg["probe"] = {
                "status": p.status.value,
                "reason": p.reason,
                "ttft_p50_ms": p.ttft_p50_ms,
                "failing_fraction": p.failing_fraction,
                "duration_ms": p.duration_ms,
            }
        elif batch and name in batch.unresolved:
            reg["probe"] = {"status": "UNKNOWN", "reason": batch.unresolved[name]}
    for key, label in (("weights", "weights_error"), ("probes", "probe_error")):
        if res.value(key) is None:
            out[label] = _part_error(res, key) or out.get("read_error") or "not read"


async def collect(
    cfg: FleetConfig, timeout_s: float = READ_TIMEOUT_S, fail_back: str = "drctl failback"
) -> dict[str, Any]:
    import asyncio

    from drctl.cli import data_status
    from drctl.cli.failed_over import last_traffic_operation
    from drctl.cli.monitor import monitor_status
    from drctl.client.connection import connect
    from drctl.client.operations import list_operations, visibility_query
    from drctl.client.reads import NoWorkerError, ReadTimeout, read_fleet

    client = await connect(cfg)  # unreachable: one line and exit 3, from the error table
    out: dict[str, Any] = {
        "fleet": cfg.name,
        "regions": {r.name: {"configured_weight": r.weight} for r in cfg.regions},
    }
    mon, ops, read, last = await asyncio.gather(
        monitor_status(client, cfg),
        list_operations(client, cfg.name, visibility_query(cfg.name), cfg),
        read_fleet(client, cfg, "status", timeout_s=timeout_s),
        last_traffic_operation(client, cfg),
        return_exceptions=True,
    )
    if isinstance(read, NoWorkerError | ReadTimeout):
        out["read_error"] = str(read)
        from drctl.models.reads import ReadResult

        read = ReadResult()
    elif isinstance(read, BaseException):
        raise read
    _regions(cfg, read, out)
    out.update(data_status.from_parts(cfg, read, out.get("read_error")))
    if isinstance(mon, BaseException):
        out["temporal_error"] = _short(mon)
    elif isinstance(ops, BaseException):
        out["temporal_error"] = _short(ops)
    else:
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
    if not isinstance(last, BaseException) and "weights_error" not in out and "read_error" not in out:
        now = {n: r.get("weight") for n, r in out["regions"].items()}
        if now != cfg.weights and (held := failed_over(now, last, fail_back)):
            out["failed_over"] = held
    out["problems"] = problems(cfg, out)
    out["state"] = state(out)
    return out


def state(data: dict[str, Any]) -> str:
    """One word for scripts (`-o json`): ok, failed-over (on purpose, exit 0), not-ok, unread."""
    if "read_error" in data:
        return "unread"
    if data["problems"]:
        return "not-ok"
    return "failed-over" if "failed_over" in data else "ok"


def problems(cfg: FleetConfig, data: dict[str, Any]) -> list[str]:
    """Why the fleet is not as it should be; empty when `drctl status` exits 0."""
    if "read_error" in data:  # the workers read nothing: one reason, not one per part
        found = [f"the workers did not read the fleet: {data['read_error']}"]
    else:
        found = _fleet_problems(cfg, data)
    mon = data.get("monitor") or {}
    if mon.get("alert"):
        found.append(f"monitor alert: {mon['alert']}")
    for o in data.get("operations") or []:
        if o.get("phase") in ("compensate", "failed"):
            found.append(f"{o['workflow_id']} is failing (phase {o['phase']})")
    if "temporal_error" in data:
        found.append(f"Temporal: {data['temporal_error']}")
    return found


def _fleet_problems(cfg: FleetConfig, data: dict[str, Any]) -> list[str]:
    """What the workers read that is out of place: region health, replicas, weights, replication lag."""
    found = []
    for name, r in data["regions"].items():
        # The monitor's state when it runs (with hysteresis), else this probe's verdict.
        state = r.get("state") or (r.get("probe") or {}).get("status")
        if state != "HEALTHY":
            why = (r.get("probe") or {}).get("reason")
            found.append(f"{name} is {state or 'unknown'}" + (f": {why}" if why else ""))
        # Serving, but unreadable or unserved (no worker on its queue): a failover there would fail.
        if (r.get("replicas") or {}).get("error"):
            found.append(f"{name} replicas unknown: {r['replicas']['error']}")
    if "weights_error" in data:
        found.append(f"global weights unknown: {data['weights_error']}")
    else:
        now = {n: r.get("weight") for n, r in data["regions"].items()}
        if now != cfg.weights and "failed_over" not in data:
            found.append(f"global weights {_fmt(now)} differ from the config's {_fmt(cfg.weights)}")
    rpo = cfg.objectives.rpo_target_s
    for rep in data.get("replication") or []:
        where = f"{rep.get('bucket', 'replication')}/{rep.get('replica_region', '?')}"
        if rep.get("error") or rep.get("lag_s") is None:
            found.append(f"replication lag of {where} unknown: {rep.get('error') or 'not measured'}")
        elif rep["lag_s"] > rpo:
            found.append(f"replication lag of {where} is {rep['lag_s']:.1f} s, over the RPO target {rpo:g} s")
    return found


def _fmt(w: dict[str, Any]) -> str:
    return " / ".join(f"{k} {v}" for k, v in w.items())


def renderables(cfg: FleetConfig, data: dict[str, Any]) -> list[RenderableType]:
    from drctl.cli import data_status

    out: list[RenderableType] = []
    mon = data.get("monitor") or {}
    if mon.get("alert"):
        out.append(Text(f"ALERT {mon['alert']}", style="bold red"))
    t = Table(
        title=f"fleet {cfg.name}"
        + (f" (monitor: {mon.get('policy')})" if mon.get("running") else " (monitor not running)")
    )
    for col in ("region", "state", "probe", "TTFT p50", "weight", "config", "replicas"):
        t.add_column(col, overflow="fold")
    reasons = []
    for name, r in data["regions"].items():
        p = r.get("probe") or {}
        rep = r.get("replicas") or {}
        # Long texts (probe reasons, API errors) go under the table so the columns stay readable.
        if p.get("reason"):
            reasons.append(f"{name}: {p['reason']}")
        if "replicas" not in rep and rep.get("error"):
            reasons.append(f"{name} replicas: {rep['error']}")
        weight = r.get("weight")
        t.add_row(
            name,
            r.get("state") or "-",
            p.get("status", "-"),
            f"{p['ttft_p50_ms']:.0f} ms" if p.get("ttft_p50_ms") is not None else "-",
            "unknown" if weight is None else str(weight),
            str(r["configured_weight"]),
            f"{rep['ready']}/{rep['replicas']} ready" if "replicas" in rep else "unknown",
        )
    out.append(t)
    out += [Text(f"  {line}") for line in reasons]
    # With the whole read missing, its one reason stands for every part's.
    shown = (
        ("read_error", "temporal_error")
        if "read_error" in data
        else ("weights_error", "probe_error", "temporal_error")
    )
    for key in shown:
        if key in data:
            out.append(Text(f"{key.replace('_', ' ')}: {data[key]}", style="yellow"))
    out += data_status.renderables(data)
    ops = data.get("operations") or []
    if ops:
        out.append(Text("running operations:"))
        out += [
            Text(f"  {o['workflow_id']} ({o['operation']}, phase {o.get('phase')}) {o.get('ui_link') or ''}")
            for o in ops
        ]
    elif "operations" in data:
        out.append(Text("no running operations"))
    found = data.get("problems") or []
    held = data.get("failed_over")
    if held:
        out.append(
            Text(
                f"FAILED OVER on purpose: all traffic on {held['target']} since {held['since'][:19]} "
                f"({held['workflow_id']}, by {held['by']})",
                style="bold yellow",
            )
        )
        out.append(Text(f"  fail back to the configured weights: {held['fail_back']}"))
    if found:
        out.append(Text(f"NOT OK ({len(found)}):", style="red"))
    else:
        out.append(Text("fleet OK, failed over" if held else "fleet OK", style="green"))
    out += [Text(f"  - {p}") for p in found]
    return out


app = typer.Typer()


@app.command("status")
def status(
    config: common.ConfigOpt = common.CONFIG,
    output: common.OutputOpt = common.TABLE,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            "-w",
            help="Refresh in place until --timeout (one block per change without a terminal).",
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            parser=seconds("--timeout"),
            metavar="DURATION",
            help="The read's bound, or how long --watch watches (90, 90s, 5m, 1h30m).",
        ),
    ] = READ_TIMEOUT_S,
    interval: Annotated[
        float,
        typer.Option(
            "--interval", parser=seconds("--interval"), metavar="DURATION", help="Between --watch refreshes."
        ),
    ] = 5.0,
) -> None:
    """The fleet now: region states, probe figures, global weights, replicas, running operations."""
    cfg = common.load(config)
    if timeout <= 0 or interval <= 0:
        raise common.UserError("--timeout and --interval must be positive seconds")
    if watch:
        if common.is_document(output):
            raise common.UserError(f"--watch renders a table; use it without --output {output.value}")
        from drctl.cli.status_watch import watch as watch_fleet

        raise typer.Exit(watch_fleet(cfg, timeout, interval))
    hint = "drctl failback" + ("" if config == common.CONFIG else f" -c {config}")
    data = common.run_async(lambda: collect(cfg, timeout, hint))
    if not common.printed_json(output, data):
        common.console.print(*renderables(cfg, data), sep="\n")  # one line each, however wide
    raise typer.Exit(exit_code(data))


def exit_code(data: dict[str, Any]) -> int:
    """0 the fleet is as configured, or failed over on purpose (its state says which); 1 it is not as
    it should be (`problems` says why); 3 the workers could not read it."""
    if "read_error" in data:
        return EXIT_UNREAD
    return EXIT_UNHEALTHY if data["problems"] else EXIT_OK
