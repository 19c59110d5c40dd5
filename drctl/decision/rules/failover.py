"""Rule `failover`: a DOWN region's whole share leaves at once, onto every region that can take it."""

from __future__ import annotations

from drctl.decision.evidence import Verdict
from drctl.decision.tick import Outcome, Tick, fmt

RULE = "failover"
# Operations a failover replaces: they would move share back onto, or keep it on, a dead region.
SUPERSEDES = ("failover", "failback", "return", "rebalance", "maintenance")


def failover(tick: Tick, notes: list[str]) -> Outcome | None:
    """Drain every DOWN region with share. Exempt from the stability window: leaving a dead region
    is the safety move. Under policy manual the decision is made and reported, not applied."""
    down = sorted(r for r, w in tick.base.items() if w > 0 and tick.verdicts[r] is Verdict.DOWN)
    if not down:
        return None
    receivers = tick.receivers(set(down), stable=False)
    names = ", ".join(f"{r} ({tick.base[r]})" for r in down)
    if not receivers:
        notes.append(f"failover: {names} DOWN but no region can receive; holding")
        return Outcome(RULE, "hold", dict(tick.base), list(notes), urgent=True)
    weights = tick.move({r: float(tick.base[r]) for r in down}, receivers)
    manual = tick.config.policy == "manual"
    reasons = [
        f"failover: {names} DOWN; share to {', '.join(receivers)} "
        f"{tick.how(sum(tick.base[r] for r in down), receivers)}: {fmt(weights)}"
        + (" (policy manual: advised, not applied)" if manual else "")
    ]
    superseded: list[str] = [op.kind for op in tick.evidence.operations if op.kind in SUPERSEDES]
    updates = {r: {"emptied_by": "failover", "last_step_pct": 0} for r in down}
    return Outcome(
        RULE,
        "failover",
        weights,
        reasons,
        urgent=True,
        advisory=manual,
        superseded=superseded,
        region_updates=updates,
    )
