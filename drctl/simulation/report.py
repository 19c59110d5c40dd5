"""Figures of one simulated run, measured against the world's truth rather than any policy's verdicts.

- time to safe: the longest stretch during which a region that could not serve at all kept weight in
  effect while another region could serve, a stretch still running at the end included (0: never
  unsafe; None: no region died; `never_safe`: still unsafe at the end, whether a region was never
  drained or a flapping one is in a down spell when the run stops);
- time to the objective: from the first fault to the start of the stretch, lasting to the end,
  in which users' errors and TTFT p99 are within the objective (None: broken at the end);
- user error share: failed user requests / offered, over the whole run;
- moves: writes of new weights to the global tier.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """One second of the world as users and the global tier saw it."""

    t_s: float
    in_effect: dict[str, int]
    dead: frozenset[str]
    error_share: float
    ttft_p99_ms: float

    @property
    def unsafe(self) -> bool:
        alive = set(self.in_effect) - self.dead
        return bool(alive) and any(self.in_effect.get(r, 0) > 0 for r in self.dead)


@dataclass(frozen=True)
class Metrics:
    safe_s: float | None
    never_safe: bool
    objective_s: float | None
    user_error_share: float
    moves: int


def measure(
    samples: Sequence[Sample],
    fault_start_s: float,
    offered: float,
    failed: float,
    moves: int,
    slo_ttft_p99_ms: float,
    slo_error_rate: float,
) -> Metrics:
    """The run's figures from its per-second samples (see the module docstring)."""
    longest = run = 0.0
    died = False
    for s in samples:
        died = died or bool(s.dead)
        run = run + 1.0 if s.unsafe else 0.0
        longest = max(longest, run)
    holds = [s.error_share <= slo_error_rate and s.ttft_p99_ms <= slo_ttft_p99_ms for s in samples]
    objective: float | None = 0.0
    if holds and not holds[-1]:
        objective = None
    else:
        broken = [s.t_s for s, ok in zip(samples, holds, strict=True) if not ok and s.t_s >= fault_start_s]
        if broken:
            objective = max(broken) + 1.0 - fault_start_s
    return Metrics(
        safe_s=longest if died else None,
        never_safe=bool(samples) and samples[-1].unsafe,
        objective_s=objective,
        user_error_share=failed / offered if offered > 0 else 0.0,
        moves=moves,
    )


def _fmt_s(values: list[float | None], never: int, label: str) -> str:
    """Median and worst of the measured seconds, and how many runs `label` (e.g. never got there)."""
    got = sorted(v for v in values if v is not None)
    if not got and not never:
        return "n/a"
    text = f"{statistics.median(got):.0f}/{got[-1]:.0f}" if got else "-"
    return text + (f" ({never} {label})" if never else "")


@dataclass(frozen=True)
class FamilyRow:
    family: str
    policy: str
    runs: int
    safe: str
    objective: str
    errors: str
    moves: str


def summarise(family: str, policy: str, metrics: Sequence[Metrics]) -> FamilyRow:
    """One family's runs with one policy, as the bench prints them."""
    safe = [m.safe_s for m in metrics if m.safe_s is not None]
    never_safe = sum(m.never_safe for m in metrics)
    objective: list[float | None] = [m.objective_s for m in metrics if m.objective_s is not None]
    never_objective = sum(m.objective_s is None for m in metrics)
    shares = [m.user_error_share for m in metrics]
    moves = [m.moves for m in metrics]
    return FamilyRow(
        family=family,
        policy=policy,
        runs=len(metrics),
        safe=_fmt_s(list(safe), never_safe, "unsafe at end"),
        objective=_fmt_s(objective, never_objective, "never"),
        errors=f"{statistics.mean(shares) * 100:.2f}%/{max(shares) * 100:.2f}%",
        moves=f"{statistics.mean(moves):.1f}/{max(moves)}",
    )


def format_table(rows: Sequence[FamilyRow]) -> str:
    """The per-family table: core and baseline side by side, medians/worst (errors: mean/worst)."""
    head = (
        "family",
        "policy",
        "runs",
        "safe s med/max",
        "objective s med/max",
        "user errors mean/max",
        "moves mean/max",
    )
    cells = [head] + [(r.family, r.policy, str(r.runs), r.safe, r.objective, r.errors, r.moves) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    return "\n".join("  ".join(c[i].ljust(widths[i]) for i in range(len(head))).rstrip() for c in cells)
