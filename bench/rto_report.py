"""RTO benchmark figures: one Trial per injected fault, and the pure summaries printed from them.

Kept apart from the runner so the arithmetic (percentiles, windows, ratios) is testable on real
trial records without bringing a stack up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from drctl.models.drill import LoadSample

Policy = Literal["drctl", "fastpath", "rounds", "baseline"]
Kind = Literal["down", "slow", "errors"]
POLICIES: tuple[Policy, ...] = ("drctl", "fastpath", "rounds", "baseline")
POLICY_TEXT: dict[Policy, str] = {
    "drctl": "the default monitor: watcher, passive signals, fast confirm, vantage quorum; "
    "global data plane off (drctl alone)",
    "fastpath": "drctl with the global tier's data plane as shipped: fast path and gateway health checks "
    "(traffic.global.fast_path, health_checks)",
    "rounds": "the first release's monitor: one probe round per interval, fast confirm, no quorum",
    "baseline": "interval x threshold: probe rounds without fast confirm",
}
# The fast path retries refused connections, empty answers and 503s on the other region; a slow
# region or one answering 500 passes through it unchanged, so its rows there would repeat drctl's.
FASTPATH_KINDS: tuple[Kind, ...] = ("down",)
KINDS: tuple[Kind, ...] = ("down", "slow", "errors")
# "degraded" on the command line means both degraded fault shapes of the issue: TTFT x20 and 50 % errors.
KIND_ALIASES: dict[str, tuple[Kind, ...]] = {"degraded": ("slow", "errors")}


class Trial(BaseModel):
    """One injected fault and what it cost. Times are seconds; None means it never happened."""

    policy: Policy
    kind: Kind
    trial: int
    offset_s: float = Field(description="Random wait after the monitor's first round, before the fault.")
    fault_at: datetime = Field(description="Wall clock when the fault was injected (t0).")
    failover_status: str | None = Field(None, description="The Failover workflow's own result status.")
    first_move_s: float | None = Field(
        None,
        description="t0 → the faulted region first lost global weight (a rebalance shed or the failover).",
    )
    detect_s: float | None = Field(None, description="t0 → the Failover workflow started.")
    first_failed_probe_s: float | None = Field(None, description="t0 → the monitor's first failed probe.")
    shift_s: float | None = Field(None, description="Failover start → global weights shifted.")
    orchestration_s: float | None = Field(None, description="Failover start → workflow closed.")
    rto_s: float | None = Field(None, description="t0 → traffic verified on the other region.")
    workflow_rto_s: float | None = Field(
        None, description="The workflow's RTO (from its first failed probe)."
    )
    slo_restored_s: float | None = Field(
        None,
        description="t0 → the target met objectives.slo under the moved load, held for its window "
        "(the failover's slo_restored_s, moved to t0); None: not restored within the RTO target.",
    )
    error_window_s: float | None = Field(None, description="First → last bad user request after t0.")
    bad_requests: int = 0
    requests: int = 0
    fully_moved: bool = False
    decisions: list[str] = Field(
        default_factory=list, description="The monitor's decision log at the end (`drctl monitor decisions`)."
    )
    error: str | None = None


def expand_kinds(spec: str) -> list[Kind]:
    """`down,degraded` → [down, slow, errors]; raises ValueError naming an unknown kind."""
    out: list[Kind] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        kinds = KIND_ALIASES.get(part) or ((part,) if part in KINDS else None)
        if kinds is None:
            known = ", ".join([*KINDS, *KIND_ALIASES])
            raise ValueError(f"unknown fault kind {part!r}; known: {known}")
        out += [k for k in kinds if k not in out]  # type: ignore[misc]
    if not out:
        raise ValueError("no fault kind given")
    return out


def error_window(samples: Iterable[LoadSample], t0: datetime, slo_ms: float) -> tuple[float | None, int]:
    """(first → last bad request sent after t0, how many were bad).

    A request is bad when it failed or took longer than the latency SLO: a user waiting 20 times
    the usual TTFT is hurt as surely as one who gets a 500. No bad request gives (0.0, 0).
    """
    bad = sorted(s.t for s in samples if s.t >= t0 and (not s.ok or s.latency_ms > slo_ms))
    if not bad:
        return 0.0, 0
    return round((bad[-1] - bad[0]).total_seconds(), 3), len(bad)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linearly interpolated percentile (q in 0..100, numpy's default); None for no values.

    Interpolated rather than nearest-rank: with two trials nearest-rank p50 is simply the faster
    one, which would flatter whichever policy had the luckier fault phase.
    """
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return round(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo), 3)


class Row(BaseModel):
    policy: Policy
    kind: Kind
    trials: int
    succeeded: int
    move_p50: float | None = None
    move_p95: float | None = None
    detect_p50: float | None
    detect_p95: float | None
    orch_p50: float | None
    orch_p95: float | None
    window_p50: float | None
    window_p95: float | None
    rto_p50: float | None
    rto_p95: float | None
    rto_met: int = Field(description="Trials whose RTO was within the target.")
    slo_p50: float | None = None
    slo_p95: float | None = None
    slo_met: int = Field(0, description="Trials whose objective was restored within the RTO target.")
    moved: int = Field(description="Trials that ended with traffic fully on the other region.")


def _stat(trials: list[Trial], field: str) -> tuple[float | None, float | None]:
    vals = [v for t in trials if (v := getattr(t, field)) is not None]
    return percentile(vals, 50), percentile(vals, 95)


def summarise(trials: Sequence[Trial], rto_target_s: float) -> list[Row]:
    """One row per policy × kind that has trials, in POLICIES × KINDS order."""
    rows: list[Row] = []
    for policy in POLICIES:
        for kind in KINDS:
            group = [t for t in trials if t.policy == policy and t.kind == kind]
            if not group:
                continue
            fields = (
                "detect_s",
                "orchestration_s",
                "error_window_s",
                "rto_s",
                "slo_restored_s",
                "first_move_s",
            )
            d, o, w, r, slo, m = (_stat(group, f) for f in fields)
            rows.append(
                Row(
                    policy=policy,
                    kind=kind,
                    trials=len(group),
                    succeeded=sum(t.failover_status == "succeeded" for t in group),
                    move_p50=m[0],
                    move_p95=m[1],
                    detect_p50=d[0],
                    detect_p95=d[1],
                    orch_p50=o[0],
                    orch_p95=o[1],
                    window_p50=w[0],
                    window_p95=w[1],
                    rto_p50=r[0],
                    rto_p95=r[1],
                    rto_met=sum(t.rto_s is not None and t.rto_s <= rto_target_s for t in group),
                    slo_p50=slo[0],
                    slo_p95=slo[1],
                    slo_met=sum(
                        t.slo_restored_s is not None and t.slo_restored_s <= rto_target_s for t in group
                    ),
                    moved=sum(t.fully_moved for t in group),
                )
            )
    return rows


def ratios(rows: Sequence[Row], against: Policy = "baseline") -> dict[str, dict[str, float | None]]:
    """Per kind: `against` p50 / drctl p50 for detection, error window and RTO (>1: drctl is faster).

    With fastpath rows too, `fast_path_window` is drctl's error window p50 over fastpath's.
    """
    out: dict[str, dict[str, float | None]] = {}
    by = {(r.policy, r.kind): r for r in rows}
    for kind in KINDS:
        other, ours, fast = by.get((against, kind)), by.get(("drctl", kind)), by.get(("fastpath", kind))
        if other is None or ours is None:
            continue
        out[kind] = {
            "detection": _ratio(other.detect_p50, ours.detect_p50),
            "error_window": _ratio(other.window_p50, ours.window_p50),
            "rto": _ratio(other.rto_p50, ours.rto_p50),
        }
        if fast is not None:
            out[kind]["fast_path_window"] = _ratio(ours.window_p50, fast.window_p50)
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return round(a / b, 2)


def _pair(p50: float | None, p95: float | None) -> str:
    f = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    return f"{f(p50)}/{f(p95)}"


def format_table(rows: Sequence[Row], rto_target_s: float) -> str:
    """Plain text: seconds as p50/p95; 'ok' counts succeeded failovers, 'met' RTOs within target.

    "RTO s" is traffic served elsewhere; "SLO s" the objective restored there under the moved load
    (held for objectives.slo.window_s), and 'slo' how many trials restored it within the target.
    """
    head = [
        "policy",
        "kind",
        "n",
        "ok",
        "first move s",
        "detect s",
        "orchestr s",
        "err window s",
        "RTO s",
        f"met<={rto_target_s:g}s",
        "SLO s",
        f"slo<={rto_target_s:g}s",
        "moved",
    ]
    body = [
        [
            r.policy,
            r.kind,
            str(r.trials),
            str(r.succeeded),
            _pair(r.move_p50, r.move_p95),
            _pair(r.detect_p50, r.detect_p95),
            _pair(r.orch_p50, r.orch_p95),
            _pair(r.window_p50, r.window_p95),
            _pair(r.rto_p50, r.rto_p95),
            f"{r.rto_met}/{r.trials}",
            _pair(r.slo_p50, r.slo_p95),
            f"{r.slo_met}/{r.trials}",
            f"{r.moved}/{r.trials}",
        ]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    out = [line(head), line(["-" * w for w in widths]), *(line(b) for b in body)]
    f = lambda v: "-" if v is None else f"{v:.2f}x"  # noqa: E731
    others: tuple[Policy, ...] = ("baseline", "rounds")
    for against in others:
        rs = ratios(rows, against)
        if not rs:
            continue
        out.append("")
        out.append(f"ratio {against}/drctl (p50; >1 means drctl is faster):")
        for kind, r in rs.items():
            fast = (
                f"  error window drctl/fastpath {f(r['fast_path_window'])}" if "fast_path_window" in r else ""
            )
            out.append(
                f"  {kind:<7} detection {f(r['detection'])}  error window {f(r['error_window'])}  "
                f"RTO {f(r['rto'])}{fast}"
            )
    return "\n".join(out)
