"""Rule `retreat`: a region that gained share in a failback or return and is no longer HEALTHY
gives the last step back within this tick."""

from __future__ import annotations

from drctl.decision.decision import Action
from drctl.decision.evidence import Verdict
from drctl.decision.tick import Outcome, Tick, fmt

RULE = "retreat"


def retreat(tick: Tick, notes: list[str]) -> Outcome | None:
    """Undo the last failback or return step of every region that now fails. Exempt from the
    stability window: reversing a step onto a failing region is a safety move."""
    back = {
        r: float(min(tick.regions[r].last_step_pct, w))
        for r, w in tick.base.items()
        if tick.regions[r].last_step_pct > 0 and w > 0 and tick.verdicts[r] is not Verdict.HEALTHY
    }
    if not back:
        return None
    receivers = tick.receivers(set(back), stable=False)
    names = ", ".join(f"{r} {tick.verdicts[r].value} (-{back[r]:g})" for r in sorted(back))
    if not receivers:
        notes.append(f"retreat: {names}, but no region can receive; holding")
        return None
    weights = tick.move(back, receivers)
    reasons = [f"retreat: {names}; the last step goes back: {fmt(weights)}"]
    updates = {r: {"last_step_pct": 0} for r in back}
    action: Action = "failback" if any(tick.regions[r].emptied_by == "failover" for r in back) else "return"
    return Outcome(RULE, action, weights, reasons, urgent=True, region_updates=updates)
