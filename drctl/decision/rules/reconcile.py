"""Rule `reconcile`: the weights in effect differ from those drctl last applied (a global tier
restarted with its config weights, a hand edit, a break-glass move)."""

from __future__ import annotations

from drctl.decision.headroom import largest_remainder
from drctl.decision.tick import Tick, fmt

RULE = "reconcile"


def drift(in_effect: dict[str, int] | None, applied: dict[str, int] | None) -> bool:
    """Whether the weights in effect differ from those applied (unknown either way: no drift)."""
    return in_effect is not None and applied is not None and in_effect != applied


def allowed(tick: Tick, in_effect: dict[str, int], applied: dict[str, int]) -> dict[str, int]:
    """What the decision allows of `applied`: no region that may not receive share is given more
    than it has in effect; what that frees stays where it is in effect (on the others, in
    proportion to their applied weights)."""
    eligible = set(tick.receivers(set(), stable=False))
    capped = {
        r: float(min(applied[r], in_effect[r])) if r not in eligible else float(applied[r]) for r in applied
    }
    freed = 100 - sum(capped.values())
    takers = {r: capped[r] for r in capped if r in eligible and capped[r] > 0} or {r: 1.0 for r in eligible}
    if freed > 0 and takers:
        total = sum(takers.values())
        for r, w in takers.items():
            capped[r] += freed * w / total
    elif freed > 0:
        return dict(in_effect)
    return largest_remainder(capped)


def describe(in_effect: dict[str, int], applied: dict[str, int]) -> str:
    """The drift in words."""
    return f"reconcile: in effect {fmt(in_effect)} differs from applied {fmt(applied)}"
