"""Partial-failure benchmark figures: what one arm recorded, and the pure arithmetic printed from it.

Kept apart from the runner (bench/partial.py) so the table is testable on recorded figures without a
stack. Server-side TTFT comes from the replicas' vLLM histograms (drctl.models.passive_window, the
`histogram_quantile` arithmetic drctl itself uses); "objective restored" is drctl.models.slo's
judgement over one-second intervals, with the users' own error counts in each interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from drctl.models.passive import SignalSnapshot
from drctl.models.passive_window import histogram_increase, merge_histograms, quantile
from drctl.models.slo import SloInterval, SloObjective, judge_slo, slo_interval

Arm = Literal["none", "failover", "rebalance"]
ARMS: tuple[Arm, ...] = ("none", "failover", "rebalance")
ARM_TEXT: dict[Arm, str] = {
    "none": "no action (a DNS health check: the region still answers); no monitor, nothing moves",
    "failover": "all or nothing: the Failover workflow to us-east-1 (as `drctl failover --to us-east-1`)",
    "rebalance": "drctl's monitor with failover.rebalance automatic",
}
SURVIVOR = "us-east-1"


class Request(BaseModel):
    """One user request through the global endpoint; times are seconds after the fault."""

    sent_s: float
    done_s: float
    ok: bool
    region: str | None = None


class Read(BaseModel):
    """One read of every listed replica's /metrics, and the global weights then."""

    t_s: float = Field(description="Seconds after the fault.")
    snapshots: list[SignalSnapshot]
    weights: dict[str, int] = Field(default_factory=dict)
    failed: dict[str, str] = Field(default_factory=dict, description="Replica -> why its read failed.")


class ArmRecord(BaseModel):
    """Everything one arm recorded in its window (fault → fault + minutes)."""

    arm: Arm
    window_s: float
    reads: list[Read]
    requests: list[Request]
    failover: dict[str, object] | None = Field(
        None, description="The Failover workflow's figures, where one ran in the window."
    )
    decisions: list[str] = Field(default_factory=list, description="The monitor's decision log at the end.")
    error: str | None = None


class ArmSummary(BaseModel):
    arm: Arm
    requests: int
    errors: int
    sent_rps: float = Field(
        description="Requests the users sent in the window, per second: the offered load."
    )
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    region_p99_ms: dict[str, float | None]
    survivor_peak_waiting: float | None
    source_peak_waiting: float | None
    restored_s: float | None = Field(description="Fault → the objective held for its window; None: never.")
    within_pct: float | None = Field(
        description="Share of the window's seconds with traffic within the objective."
    )
    final_weights: dict[str, int]
    evidence: str

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.requests if self.requests else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def window_ttft(reads: Sequence[Read], region: str | None = None) -> tuple[float | None, float | None]:
    """TTFT p50 and p99 (ms) over the window: each replica's histogram increase from its first read
    to its last, summed over the replicas. A replica that appears later (a scale-up) counts from its
    first read; one killed counts until its last."""
    series: dict[str, list[SignalSnapshot]] = {}
    for rd in reads:
        for s in rd.snapshots:
            if s.ttft is not None and (region is None or s.region == region):
                series.setdefault(s.source, []).append(s)
    parts = [h for snaps in series.values() if (h := histogram_increase([s.ttft for s in snaps if s.ttft]))]
    merged = merge_histograms(parts)
    if merged is None:
        return None, None
    return _ms(quantile(0.5, merged)), _ms(quantile(0.99, merged))


def peak_waiting(reads: Sequence[Read], region: str) -> float | None:
    """The most requests waiting (vllm:num_requests_waiting, summed over the region's replicas) at one read."""
    sums = [
        sum(s.queue for s in rd.snapshots if s.region == region and s.queue is not None)
        for rd in reads
        if any(s.region == region and s.queue is not None for s in rd.snapshots)
    ]
    return max(sums) if sums else None


def intervals(reads: Sequence[Read], requests: Sequence[Request]) -> list[SloInterval]:
    """One interval per pair of consecutive reads: TTFT p99 from every replica's histograms, and the
    users' requests finished in it with their errors (refusals and timeouts never reach a replica)."""
    out = []
    for a, b in zip(reads, reads[1:], strict=False):
        iv = slo_interval(
            {s.source: s for s in a.snapshots}, {s.source: s for s in b.snapshots}, a.t_s, b.t_s
        )
        done = [r for r in requests if a.t_s <= r.done_s < b.t_s]
        out.append(iv.model_copy(update={"requests": len(done), "errors": sum(not r.ok for r in done)}))
    return out


def summarise(rec: ArmRecord, objective: SloObjective, source: str = "us-west-1") -> ArmSummary:
    inside = [r for r in rec.requests if 0 <= r.done_s <= rec.window_s]
    ivs = intervals(rec.reads, rec.requests)
    verdict = judge_slo(ivs, objective)
    busy = [iv for iv in ivs if iv.requests > 0]
    within = [iv for iv in busy if not iv.breaches(objective)]
    p50, p99 = window_ttft(rec.reads)
    regions = sorted({s.region for rd in rec.reads for s in rd.snapshots})
    return ArmSummary(
        arm=rec.arm,
        requests=len(inside),
        errors=sum(not r.ok for r in inside),
        sent_rps=round(sum(0 <= r.sent_s <= rec.window_s for r in rec.requests) / rec.window_s, 2),
        ttft_p50_ms=p50,
        ttft_p99_ms=p99,
        region_p99_ms={r: window_ttft(rec.reads, r)[1] for r in regions},
        survivor_peak_waiting=peak_waiting(rec.reads, SURVIVOR),
        source_peak_waiting=peak_waiting(rec.reads, source),
        restored_s=verdict.restored_s,
        within_pct=round(100 * len(within) / len(busy), 1) if busy else None,
        final_weights=rec.reads[-1].weights if rec.reads else {},
        evidence=verdict.evidence,
    )


def _f(v: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def format_table(rows: Sequence[ArmSummary], objective: SloObjective, source: str = "us-west-1") -> str:
    """Plain text, one row per arm: TTFT in ms, waiting in requests, restored in seconds after the fault."""
    head = [
        "arm",
        "requests",
        "errors",
        "TTFT p50",
        "TTFT p99",
        f"{source} p99",
        f"{SURVIVOR} p99",
        f"{SURVIVOR} peak waiting",
        f"{source} peak waiting",
        "in SLO",
        "restored",
        "weights at end",
    ]
    body = [
        [
            r.arm,
            str(r.requests),
            "-" if r.error_rate is None else f"{r.error_rate:.1%}",
            _f(r.ttft_p50_ms),
            _f(r.ttft_p99_ms),
            _f(r.region_p99_ms.get(source)),
            _f(r.region_p99_ms.get(SURVIVOR)),
            _f(r.survivor_peak_waiting),
            _f(r.source_peak_waiting),
            _f(r.within_pct, "{:.0f}%"),
            "never" if r.restored_s is None else f"{r.restored_s:.1f}s",
            "/".join(str(w) for w in r.final_weights.values()) or "-",
        ]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    why = [f"  {r.arm:<9} {r.evidence}" for r in rows]
    return "\n".join(
        [
            line(head),
            line(["-" * w for w in widths]),
            *(line(b) for b in body),
            "",
            f"objective (objectives.slo): TTFT p99 <= {objective.ttft_p99_ms:g} ms and errors "
            f"<= {objective.error_rate:.1%}, held {objective.window_s:g}s; restored, or why not:",
            *why,
        ]
    )
