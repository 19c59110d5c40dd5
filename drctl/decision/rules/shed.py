"""Rule `shed`: a region SATURATED or over its usable capacity for the breach window moves its
excess to regions with headroom, one step per shed_step_interval_s."""

from __future__ import annotations

from datetime import timedelta

from drctl.decision.evidence import Verdict
from drctl.decision.headroom import level_fill
from drctl.decision.tick import Outcome, Tick, fmt

RULE = "shed"


def _breached(tick: Tick, region: str) -> bool:
    since = tick.regions[region].breach_since
    window = timedelta(seconds=tick.config.breach_window_s)
    return since is not None and tick.now - since >= window


def _excess(tick: Tick, region: str) -> float | None:
    """Share over what the region can carry: over usable capacity if known, else the share of the
    replicas it lost (desired - ready - loading of desired)."""
    points = tick.points
    if region in points:
        return tick.base[region] - points[region]
    cap = tick.evidence.regions[region].capacity
    if cap is None or cap.desired <= 0:
        return None
    lost = max(0, cap.desired - cap.ready - cap.loading)
    return tick.base[region] * lost / cap.desired


def shed(tick: Tick, notes: list[str]) -> Outcome | None:
    """Shed breaching regions' excess, within the receivers' headroom; a fleet that is SATURATED
    everywhere evens out so every region carries the same fraction of its capacity."""
    cfg = tick.config
    breaching = sorted(r for r, w in tick.base.items() if w > 0 and _breached(tick, r))
    if not breaching or cfg.mode == "off":
        return None
    if tick.memory.next_shed_at is not None and tick.now < tick.memory.next_shed_at:
        notes.append(
            f"shed: {', '.join(breaching)} waits for the step spacing until {tick.memory.next_shed_at}"
        )
        return None
    donors = [r for r in breaching if not tick.turning(r, -1)]
    if len(donors) < len(breaching):
        notes.append(f"shed: {', '.join(sorted(set(breaching) - set(donors)))} within the stability window")
    serving = tick.serving()
    points = tick.points
    if (
        serving
        and all(tick.verdicts[r] is Verdict.SATURATED for r in serving)
        and set(serving) <= set(points)
        # A HEALTHY region without share (emptied, not yet back) is headroom: not fleet-wide.
        and not any(v is Verdict.HEALTHY for v in tick.verdicts.values())
    ):
        # Fleet-wide overload: no one has headroom; even out the fraction each carries.
        total = float(sum(tick.base[r] for r in serving))
        level = level_fill(total, dict.fromkeys(serving, 0.0), serving, points)
        amounts = {r: tick.base[r] - level[r] for r in donors if tick.base[r] > level[r]}
        receivers = [r for r in tick.receivers(set(amounts)) if level[r] > tick.base[r]]
        room = sum(level[r] - tick.base[r] for r in receivers)
    else:
        amounts = {r: e for r in donors if (e := _excess(tick, r)) is not None and e > 0}
        receivers = tick.receivers(set(breaching))
        room = sum(max(0.0, points[r] - tick.base[r]) for r in receivers if r in points)
        if any(r not in points for r in receivers):
            room = float("inf")  # a receiver of unknown capacity: the home-weight spread caps it
    total = min(sum(amounts.values()), room)
    if total < cfg.min_step_pct or not receivers:
        if amounts:
            notes.append(
                f"shed: {', '.join(sorted(amounts))} over capacity, but the move ({total:.1f}) "
                f"is under {cfg.min_step_pct} points or no region can take it"
            )
        return None
    scale = total / sum(amounts.values())
    weights = tick.move({r: a * scale for r, a in amounts.items()}, receivers)
    advise = cfg.mode == "advise"
    reasons = [
        f"shed: {', '.join(sorted(amounts))} over usable capacity for {cfg.breach_window_s:g} s; "
        f"{total:.1f} points to {', '.join(receivers)}: {fmt(weights)}"
        + (" (advise: not applied)" if advise else "")
    ]
    updates = {r: {"emptied_by": tick.regions[r].emptied_by or "shed", "last_step_pct": 0} for r in amounts}
    fleet = {"next_shed_at": tick.now + timedelta(seconds=cfg.shed_step_interval_s)}
    return Outcome(
        RULE,
        "shed",
        weights,
        reasons,
        urgent=True,
        advisory=advise,
        region_updates=updates,
        fleet_updates=fleet,
    )
