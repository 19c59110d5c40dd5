"""RTO benchmark: inject real faults into a private dev stack and time drctl's failover against a baseline.

    python bench/rto.py [--trials 3] [--kinds down,degraded] [--policies drctl,fastpath,rounds,baseline]
                        [--interval-s 10] [--threshold 3] [--json out.json] [--keep-stack]

Every policy runs the same FleetMonitor and Failover workflows in the same run; they differ only
in health settings:
- drctl: the default config. The watcher activity probes and reads passive signals (the regional
  gateways' counters, every second), a breach makes a region SUSPECT and a probe confirms it, and
  the other region's worker votes before the failover (health.quorum; the bench's one worker
  process serves every queue, so the vote costs its real round trip but shares the network path).
- fastpath: drctl with the global tier's data plane as shipped: the fast path
  (`traffic.global.fast_path`: the global HAProxy retries a refused, empty or 503 request on the
  other region) and the gateways' health checks (`traffic.global.health_checks`); the bench
  restarts the global HAProxy on its re-rendered config. Run for the down fault only (see
  FASTPATH_KINDS). Every other policy turns both off, so it measures drctl alone.
- rounds: the first release's monitor: one probe round per interval, fast confirm, no passive
  signals, no vantage quorum.
- baseline: interval × threshold: rounds without fast confirm.
Trials are interleaved (policy inside kind inside trial) so machine-load drift hits all alike. The
setup (stack, worker, fleet reset, faults) lives in bench/rto_fleet.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/rto.py`: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError

from activities.chaos import _load as run_load  # the drills' bounded open-loop generator
from bench import rto_fleet
from bench.args import BOUNDED_LOAD, BenchParser
from bench.rto_report import (
    FASTPATH_KINDS,
    POLICIES,
    POLICY_TEXT,
    Kind,
    Policy,
    Trial,
    error_window,
    expand_kinds,
    format_table,
    ratios,
    summarise,
)
from drctl.cli.monitor import monitor_decisions, start_monitor
from drctl.client.monitor_view import live_status
from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.devstack.restart import restart_global_gateway
from drctl.models.drill import LoadSample
from drctl.models.failover import FailoverResult
from drctl.models.health import RegionState
from drctl.providers.auth import auth_headers
from drctl.providers.traffic_factory import global_traffic

TAIL_S = 2.0  # load kept running after the failover closes, to see whether errors really stopped
# The bench's objective for "SLO restored": TTFT p99 within vLLM's 250 ms bucket edge. Its steady
# TTFT (150 ms) sits in the (100, 250] ms bucket, where a histogram p99 interpolates to ~248 ms, so
# the 200 ms default could never be shown met from the servers' histograms however healthy they are.


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = BenchParser(prog="bench/rto.py", description=__doc__.split("\n")[0])
    p.number("--trials", 3, "Faults per policy and kind", ">= 1")
    p.add_argument(
        "--kinds",
        default="down,degraded",
        help="Comma list of down, slow (TTFT x20), errors (50%% 500s); degraded = slow,errors.",
    )
    p.add_argument(
        "--policies", default=",".join(POLICIES), help=f"Comma list of {', '.join(POLICIES)} (default: all)."
    )
    p.add_argument("--interval-s", type=float, default=10.0, help="Health check interval (default 10).")
    p.number("--threshold", 3, "Consecutive failed checks for UNHEALTHY", ">= 1")
    p.number("--rps", 20.0, "User load through the global endpoint", "(0, 100]", why=BOUNDED_LOAD)
    p.add_argument(
        "--base-ttft-ms",
        type=float,
        default=150.0,
        help="Replica TTFT at steady state; the slow fault makes it x20 (default 150).",
    )
    p.add_argument("--failover-timeout-s", type=float, default=180.0, help="Per-trial wait for the failover.")
    p.add_argument("--seed", type=int, default=None, help="Seed of the random fault offsets.")
    p.add_argument("--json", type=Path, default=None, help="Write the raw figures here.")
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        help="Print the table of a saved --json run and exit (no stack, no faults).",
    )
    p.add_argument("--keep-stack", action="store_true", help="Leave the dev stack running at the end.")
    args = p.parse_args(argv)
    try:
        args.kinds = expand_kinds(args.kinds)
    except ValueError as exc:
        p.error(str(exc))
    args.policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    unknown = [x for x in args.policies if x not in POLICIES]
    if unknown or not args.policies:
        p.error(
            f"unknown policy {', '.join(map(repr, unknown))}; known: {', '.join(POLICIES)}"
            if unknown
            else "--policies: no policy given"
        )
    return args


def policy_config(cfg: FleetConfig, policy: Policy) -> FleetConfig:
    """The fleet config under one policy (module docstring): only health settings and the data plane differ.

    Both are on by default; every policy but fastpath turns them off explicitly, so drctl's own
    detection and shift are what it measures.
    """
    data_plane = policy == "fastpath"
    tier = cfg.traffic.global_tier.model_copy(update={"fast_path": data_plane, "health_checks": data_plane})
    watcher = policy in ("drctl", "fastpath")
    passive = cfg.health.passive.model_copy(update={"enabled": watcher})
    # The first release neither rebalanced: a gray failure waited for the full failover.
    failover = cfg.failover.model_copy(update={"rebalance": "automatic" if watcher else "off"})
    quorum = cfg.health.quorum.model_copy(update={"mode": "majority" if watcher else "off"})
    health = cfg.health.model_copy(
        update={
            "fast_confirm": policy != "baseline",
            "watcher": watcher,
            "passive": passive,
            "quorum": quorum,
        }
    )
    return cfg.model_copy(
        update={
            "health": health,
            "failover": failover,
            "traffic": cfg.traffic.model_copy(update={"global_tier": tier}),
        }
    )


# The objective the rebalance holds regions to: 4x the replicas' steady TTFT, so the slow fault (x20)
# breaches it and steady state does not (the dev stack's 200 ms default is below a 150 ms TTFT's p99).
OBJECTIVE_X = 4


def with_objective(cfg: FleetConfig, base_ttft_ms: float) -> FleetConfig:
    slo = cfg.objectives.slo.model_copy(update={"ttft_p99_ms": OBJECTIVE_X * base_ttft_ms})
    return cfg.model_copy(update={"objectives": cfg.objectives.model_copy(update={"slo": slo})})


def fast_path_on(cfg: FleetConfig) -> bool:
    return bool(getattr(cfg.traffic.global_tier, "fast_path", False))


def health_checks_on(cfg: FleetConfig) -> bool:
    return bool(getattr(cfg.traffic.global_tier, "health_checks", False))


def data_plane(cfg: FleetConfig) -> tuple[bool, bool]:
    """What the global HAProxy's rendered config depends on: (fast path, health checks)."""
    return fast_path_on(cfg), health_checks_on(cfg)


def _secs(a: datetime | None, b: datetime | None) -> float | None:
    return None if a is None or b is None else round((a - b).total_seconds(), 3)


async def _monitor_ready(client: Client, cfg: FleetConfig, timeout_s: float) -> None:
    """Until the monitor has probed at least once and sees every region HEALTHY."""
    deadline = time.monotonic() + timeout_s
    handle = client.get_workflow_handle(f"monitor/{cfg.name}")
    last: object = None
    while time.monotonic() < deadline:
        with contextlib.suppress(RPCError):
            st = await live_status(handle)  # with the watcher, its heartbeat carries the rounds
            last = {r: t.state.value for r, t in st.regions.items()}
            if st.probe_rounds >= 1 and all(t.state is RegionState.HEALTHY for t in st.regions.values()):
                return
        await asyncio.sleep(0.25)
    raise TimeoutError(f"monitor not ready with every region HEALTHY after {timeout_s:g}s: {last}")


async def _stop_monitor(client: Client, cfg: FleetConfig) -> None:
    handle = client.get_workflow_handle(f"monitor/{cfg.name}")
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        # Interrupted: the worker is stopping, so nothing would run the monitor's cancellation.
        with contextlib.suppress(RPCError):
            await handle.terminate("bench interrupted")
        return
    with contextlib.suppress(RPCError):
        await handle.cancel()
    try:
        await asyncio.wait_for(handle.result(), 30)
    except (WorkflowFailureError, RPCError):
        pass  # cancelled (the expected end) or already gone
    except TimeoutError:
        print("bench: monitor ignored its cancellation for 30 s; terminating it", file=sys.stderr, flush=True)
        with contextlib.suppress(RPCError):
            await handle.terminate("bench: monitor did not stop on cancel")


async def _await_failover(
    client: Client, cfg: FleetConfig, t0: datetime, timeout_s: float
) -> tuple[FailoverResult, datetime | None]:
    """The first Failover run started after t0, awaited to its end: (result, close time)."""
    deadline = time.monotonic() + timeout_s
    wid = f"failover/{cfg.name}"
    run_id: str | None = None
    while run_id is None:
        with contextlib.suppress(RPCError):
            desc = await client.get_workflow_handle(wid).describe()
            if desc.start_time and desc.start_time > t0:
                run_id = desc.run_id
                break
        if time.monotonic() > deadline:
            raise TimeoutError(f"no failover started within {timeout_s:g}s of the fault")
        await asyncio.sleep(0.2)
    handle = client.get_workflow_handle(wid, run_id=run_id, result_type=FailoverResult)
    # A failover that did not succeed ends Failed and carries its result: the trial reports it.
    res = await asyncio.wait_for(result_of(handle, FailoverResult), max(1.0, deadline - time.monotonic()))
    desc = await handle.describe()
    if desc.status not in (WorkflowExecutionStatus.COMPLETED, WorkflowExecutionStatus.FAILED):
        raise RuntimeError(f"failover run {run_id} ended {desc.status}")
    return res, desc.close_time


async def _decisions(client: Client, cfg: FleetConfig) -> list[str]:
    """The monitor's decision log, one line each: why the share moved when it did (or why not)."""
    with contextlib.suppress(RPCError):
        view = await monitor_decisions(client, cfg)
        if view is not None:
            return [d.line() for d in view.entries]
    return []


async def _first_move(cfg: FleetConfig, source: str, t0: datetime, timeout_s: float) -> float | None:
    """Seconds from t0 until `source` first has less global weight than configured (every 50 ms, bounded)."""
    configured = cfg.region(source).weight
    deadline = time.monotonic() + timeout_s
    traffic = global_traffic(cfg)
    while time.monotonic() < deadline:
        w = await asyncio.to_thread(traffic.get_weights)
        if w.get(source, configured) < configured:
            return round((datetime.now(UTC) - t0).total_seconds(), 3)
        await asyncio.sleep(0.05)
    return None


async def run_trial(
    client: Client,
    cfg: FleetConfig,
    policy: Policy,
    kind: Kind,
    n: int,
    offset_s: float,
    args: argparse.Namespace,
) -> Trial:
    """Reset, watch, inject at t0, wait for the failover, measure; always stops the monitor."""
    pcfg = policy_config(cfg, policy)
    source = cfg.regions[0].name
    if data_plane(pcfg) != args.global_data_plane:  # the global HAProxy's config follows the policy
        await asyncio.to_thread(restart_global_gateway, pcfg, args.config_path)
        args.global_data_plane = data_plane(pcfg)
    await asyncio.to_thread(rto_fleet.reset_fleet, cfg)
    await rto_fleet.wait_probed_healthy(cfg, 60)
    await rto_fleet.wait_no_operations(client, cfg, 60)
    await asyncio.sleep(rto_fleet.drain_s(cfg, args.base_ttft_ms))
    samples: list[LoadSample] = []
    load: asyncio.Task[None] | None = None
    t0 = datetime.now(UTC)
    trial = Trial(policy=policy, kind=kind, trial=n, offset_s=round(offset_s, 3), fault_at=t0)
    try:
        await start_monitor(client, pcfg)
        await _monitor_ready(client, pcfg, 60)
        budget = offset_s + args.failover_timeout_s + TAIL_S + 10
        load = asyncio.create_task(
            run_load(cfg, args.rps, time.monotonic() + budget, samples, auth_headers(cfg), 10.0)
        )
        await asyncio.sleep(offset_s)  # fault phase against the probe schedule: uniform, not lucky
        t0 = trial.fault_at = datetime.now(UTC)
        await asyncio.to_thread(rto_fleet.inject, cfg, source, kind, args.base_ttft_ms)
        moved = asyncio.create_task(_first_move(cfg, source, t0, args.failover_timeout_s))
        try:
            res, closed = await _await_failover(client, cfg, t0, args.failover_timeout_s)
            trial.first_move_s = await moved
        finally:
            moved.cancel()
        await asyncio.sleep(TAIL_S)
        trial.failover_status, trial.error = res.status, res.error
        trial.detect_s = _secs(res.started_at, t0)
        trial.first_failed_probe_s = _secs(res.fault_at, t0)
        trial.shift_s = _secs(res.shifted_at, res.started_at)
        trial.orchestration_s = _secs(closed, res.started_at)
        trial.rto_s = _secs(res.verified_at, t0)
        trial.workflow_rto_s = res.rto_s
        # The workflow counts from its own fault_at (first failed probe); the bench from t0.
        from_t0 = _secs(res.fault_at, t0)
        if res.slo_restored_s is not None and from_t0 is not None:
            trial.slo_restored_s = round(res.slo_restored_s + from_t0, 3)
        weights = await asyncio.to_thread(lambda: global_traffic(cfg).get_weights())
        tail = [s for s in samples if closed is not None and s.t > closed]
        trial.fully_moved = (
            weights.get(source) == 0 and bool(tail) and all(s.ok and s.region == res.target for s in tail)
        )
    except (TimeoutError, RuntimeError, WorkflowFailureError, RPCError) as exc:
        trial.error = f"{type(exc).__name__}: {exc}"
    finally:
        if load is not None:
            load.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await load
        trial.decisions = await _decisions(client, pcfg)
        await _stop_monitor(client, pcfg)
    trial.error_window_s, trial.bad_requests = error_window(samples, t0, cfg.health.ttft_degraded_ms)
    trial.requests = sum(s.t >= t0 for s in samples)
    return trial


def _shown_s(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _line(t: Trial) -> str:
    f = _shown_s
    return (
        f"[{t.policy:<8} {t.kind:<6} #{t.trial}] offset {t.offset_s:.1f}s: failover {t.failover_status}, "
        f"first move {f(t.first_move_s)}s, "
        f"first failed probe {f(t.first_failed_probe_s)}s, detect {f(t.detect_s)}s, "
        f"orchestration {f(t.orchestration_s)}s, RTO {f(t.rto_s)}s, SLO restored {f(t.slo_restored_s)}s, "
        f"error window {f(t.error_window_s)}s ({t.bad_requests}/{t.requests} bad), moved {t.fully_moved}"
        + (f", error: {t.error}" if t.error else "")
    )


async def run_all(cfg: FleetConfig, args: argparse.Namespace, trials: list[Trial]) -> None:
    rng = random.Random(args.seed)
    async with rto_fleet.running_worker(cfg) as client:
        for n in range(1, args.trials + 1):
            for kind in args.kinds:
                for policy in [p for p in POLICIES if p in args.policies]:
                    if policy == "fastpath" and kind not in FASTPATH_KINDS:
                        continue
                    t = await run_trial(client, cfg, policy, kind, n, rng.uniform(0, args.interval_s), args)
                    trials.append(t)
                    print(_line(t), flush=True)


def settings(cfg: FleetConfig, args: argparse.Namespace) -> dict[str, Any]:
    """What a table's figures depend on; saved with them so `--report` can print the same header."""
    h = cfg.health
    return {
        "region": cfg.regions[0].name,
        "interval_s": h.interval_s,
        "failure_threshold": h.failure_threshold,
        "fast_confirm_interval_s": h.fast_confirm_interval_s,
        "rps": args.rps,
        "base_ttft_ms": args.base_ttft_ms,
        "ttft_degraded_ms": h.ttft_degraded_ms,
        "slo_ttft_p99_ms": cfg.objectives.slo.ttft_p99_ms,
        "rto_target_s": cfg.objectives.rto_target_s,
        "slo": cfg.objectives.slo.model_dump(),
        "seed": args.seed,
    }


def render(st: dict[str, Any], trials: list[Trial]) -> str:
    rows = summarise(trials, st["rto_target_s"])
    head = (
        f"RTO benchmark: {len(trials)} faults in {st['region']}, interval {st['interval_s']:g}s, "
        f"threshold {st['failure_threshold']}, fast confirm every {st['fast_confirm_interval_s']:g}s "
        f"(not baseline), load {st['rps']:g} rps, steady TTFT {st['base_ttft_ms']:g} ms, "
        f"bad request = error or > {st['ttft_degraded_ms']:g} ms; seconds as p50/p95"
        # Saved runs from before the rebalance have no objective in their settings.
        + (f"; objective TTFT p99 {st['slo_ttft_p99_ms']:g} ms" if "slo_ttft_p99_ms" in st else "")
    )
    if slo := st.get("slo"):  # runs saved before the objective existed have none
        head += (
            f"\nSLO restored = TTFT p99 <= {slo['ttft_p99_ms']:g} ms and errors <= {slo['error_rate']:.1%} "
            f"at us-east-1's replicas, held {slo['window_s']:g}s under the moved load"
        )
    legend = "\n".join(f"  {p:<8} {POLICY_TEXT[p]}" for p in POLICIES if any(t.policy == p for t in trials))
    return head + "\n" + legend + "\n\n" + format_table(rows, st["rto_target_s"])


def write_json(path: Path, st: dict[str, Any], trials: list[Trial]) -> None:
    rows = summarise(trials, st["rto_target_s"])
    path.write_text(
        json.dumps(
            {
                "settings": st,
                "trials": [t.model_dump(mode="json") for t in trials],
                "rows": [r.model_dump(mode="json") for r in rows],
                "ratios": ratios(rows),
            },
            indent=2,
        )
    )


def report_from_json(path: Path) -> str:
    """The table of a saved run (`--json`), recomputed from its raw trials."""
    data = json.loads(path.read_text())
    return render(data["settings"], [Trial.model_validate(t) for t in data["trials"]])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        try:
            print(report_from_json(args.report))
        except (OSError, ValueError, KeyError) as exc:
            print(
                f"{args.report}: not a bench/rto.py --json file ({type(exc).__name__}: {exc})",
                file=sys.stderr,
            )
            return 2
        return 0
    rto_fleet.quiet_temporal()
    cfg_path = rto_fleet.write_bench_config(args.interval_s, args.threshold)
    cfg = with_objective(rto_fleet.load(cfg_path), args.base_ttft_ms)
    trials: list[Trial] = []
    interrupted = False
    try:
        print(f"bringing the dev stack up (config {cfg_path}) ...", flush=True)
        rto_fleet.stack_up(cfg, cfg_path, args.base_ttft_ms)
        args.config_path, args.global_data_plane = cfg_path, data_plane(cfg)
        asyncio.run(run_all(cfg, args, trials))
    except (KeyboardInterrupt, rto_fleet.WorkerStopped) as exc:
        interrupted = True
        print(f"interrupted ({exc or 'Ctrl-C'}): reporting the trials done so far", file=sys.stderr)
    except rto_fleet.stack.StackError as exc:
        print(f"dev stack did not come up: {exc}\n--- {exc.component} log ---\n{exc.log}", file=sys.stderr)
        return 1
    finally:
        if args.keep_stack:
            print(f"dev stack left running: drctl dev down -c {cfg_path}", file=sys.stderr)
        else:
            rto_fleet.stack_down(cfg)
    if trials:
        st = settings(cfg, args)
        if args.json:
            write_json(args.json, st, trials)
        print()
        print(render(st, trials))
    failed = [t for t in trials if t.failover_status != "succeeded"]
    rc = 130 if interrupted else (1 if failed or not trials else 0)
    if rc == 0 and not args.keep_stack:
        shutil.rmtree(cfg_path.parent, ignore_errors=True)
    elif not args.keep_stack:
        print(f"stack logs kept in {cfg_path.parent}/s/logs", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
