"""Rules `failback` and `return`: a region below its home weight that has been HEALTHY for
return_stable_s gets up to return_step_pct back per tick, from the regions above theirs."""

from __future__ import annotations

from datetime import timedelta

from drctl.decision.decision import Action
from drctl.decision.evidence import Verdict
from drctl.decision.headroom import largest_remainder
from drctl.decision.tick import Outcome, Tick, fmt


def _stable(tick: Tick, region: str) -> bool:
    mem = tick.regions[region]
    window = timedelta(seconds=tick.config.return_stable_s)
    return mem.since is not None and tick.now - mem.since >= window


def _step(tick: Tick, region: str) -> int:
    """The share this tick gives back: the step, never past home nor past the region's capacity."""
    deficit = tick.home[region] - tick.base[region]
    step = min(tick.config.return_step_pct, deficit)
    points = tick.points
    if region in points:
        step = min(step, max(0, int(points[region] - tick.base[region])))
    # A step under the minimum is not worth a move, unless it finishes the return.
    return step if step >= tick.config.min_step_pct or step == deficit else 0


def returning(tick: Tick, notes: list[str]) -> Outcome | None:
    """Step every stable region below home back up, taking from those above home in proportion
    to their excess. Failback (emptied by a failover) follows the policy; return (emptied by a
    shed) follows the rebalance mode."""
    cfg = tick.config
    below = sorted(
        r for r in tick.base if tick.base[r] < tick.home[r] and tick.verdicts[r] is Verdict.HEALTHY
    )
    steps: dict[str, int] = {}
    for r in below:
        failback = tick.regions[r].emptied_by == "failover"
        if not failback and cfg.mode == "off":
            continue
        if not _stable(tick, r):
            notes.append(f"return: {r} HEALTHY for less than {cfg.return_stable_s:g} s")
        elif tick.turning(r, +1):
            notes.append(f"return: {r} shed within the stability window ({cfg.stability_window_s:g} s)")
        elif (step := _step(tick, r)) > 0:
            steps[r] = step
    donors = {r: tick.base[r] - tick.home[r] for r in tick.base if tick.base[r] > tick.home[r]}
    donors = {r: e for r, e in donors.items() if not tick.turning(r, -1)}
    if not steps or not donors:
        return None
    # A donor within its stability window gives nothing: the others give at most their excess.
    total = min(sum(steps.values()), sum(donors.values()))
    floats = {r: float(w) for r, w in tick.base.items()}
    given = sum(steps.values())
    for r, s in steps.items():
        floats[r] += s * total / given
    excess = sum(donors.values())
    for r, e in donors.items():
        floats[r] -= total * e / excess
    weights = largest_remainder(floats)
    failback = any(tick.regions[r].emptied_by == "failover" for r in steps)
    action: Action = "failback" if failback else "return"
    advisory = (cfg.policy == "manual") if failback else (cfg.mode == "advise")
    names = ", ".join(f"{r} +{weights[r] - tick.base[r]}" for r in sorted(steps))
    reasons = [
        f"{action}: {names} (HEALTHY for {cfg.return_stable_s:g} s or more): {fmt(weights)}"
        + (" (advised, not applied)" if advisory else "")
    ]
    updates = {
        r: {
            "last_step_pct": max(0, weights[r] - tick.base[r]),
            "emptied_by": None if weights[r] >= tick.home[r] else tick.regions[r].emptied_by,
        }
        for r in steps
    }
    return Outcome(action, action, weights, reasons, urgent=True, advisory=advisory, region_updates=updates)
