"""The failover plan: weights after the shift, the target's health and the replicas it (and, in a
spread, every other receiver whose share rises) needs.

Pure and free of Temporal, so the Failover workflow, `drctl failover --dry-run` and the unit tests
compute the same plan from the same reads.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from drctl.models.activity_io import Capacity
from drctl.models.fleet_spec import FleetSpec
from drctl.models.health import ProbeStatus, RegionProbe


def shift_weights(current: dict[str, int], source: str, target: str) -> dict[str, int]:
    """Source to 0, target takes the source's share; never all zero."""
    new = dict(current)
    moved = new.get(source, 0)
    new[source] = 0
    new[target] = new.get(target, 0) + moved
    if sum(new.values()) <= 0:
        # Everything was already 0 except nothing: keep the target serving rather than black-hole.
        new[target] = 1
    return cap_weights(new)


# The smallest per-record limit of the global tiers: Route 53 takes 0..255, HAProxy 0..256.
WEIGHT_CAP = 255


def cap_weights(weights: dict[str, int], max_weight: int = WEIGHT_CAP) -> dict[str, int]:
    """Scale weights down so the largest is `max_weight`, keeping the shares (a serving region stays >= 1).

    Moving a region's weight onto another can exceed what one record holds (200 + 100 > 255); clipping
    only the largest would change who serves how much, so all are scaled.
    """
    top = max(weights.values(), default=0)
    if top <= max_weight:
        return dict(weights)
    return {k: max(1, round(v * max_weight / top)) if v > 0 else 0 for k, v in weights.items()}


def _share(weights: dict[str, int], region: str) -> float:
    total = sum(weights.values())
    return weights.get(region, 0) / total if total > 0 else 0.0


def serving_replicas(spec: FleetSpec, region: str, weights: dict[str, int]) -> float:
    """Replicas that carry `region`'s current share, by the configured fleet.

    The configured `replicas` of a region carry its configured share. A failover's source is, most
    of the time, a region whose API and replicas are gone, so its live Deployment is the one thing
    that cannot be read; its configured steady state stands in for the replicas that were serving.
    A source configured at weight 0 (a standby now serving) is measured by the whole fleet's
    configured replicas per share.
    """
    cfg_weights = spec.weights
    share_now = _share(weights, region)
    own = spec.region(region) if region in spec.region_names else None
    if own is not None and own.weight > 0 and own.replicas > 0:
        return own.replicas * share_now / _share(cfg_weights, region)
    fleet = sum(r.replicas for r in spec.regions if r.weight > 0)
    return fleet * share_now


def needed_replicas(
    spec: FleetSpec,
    weights: dict[str, int],
    after: dict[str, int],
    target: str,
    target_replicas: int,
    *,
    part: float = 1.0,
) -> tuple[int, str]:
    """Replicas the target needs for the share it carries after the shift, and how that was sized.

    The rule (docs/failover.md, "How many replicas a failover target needs"):
    1. With `workload.max_rps_per_replica` and `workload.peak_rps` configured:
       ceil(peak_rps × target's share after the shift / max_rps_per_replica).
    2. Otherwise the replicas that serve the traffic today move with it: the target keeps the
       replicas that carry its own share (none at weight 0), plus, for each source, the source's
       serving replicas (`serving_replicas`) times the fraction of its weight that moves, times
       `part`: the fraction of the moved weight this region receives (1 when it takes it all, as
       an operator's target does; `receiver_part` when a spread shares it out).
    A target that will carry traffic needs at least one replica. Each failover sizes only its own
    target for its own share: with three regions, moving 50 of 50/30/20 onto the 20 region sizes
    that region for 70 %, not for the whole fleet.
    """
    share_after = _share(after, target)
    floor = 1 if share_after > 0 else 0
    if spec.max_rps_per_replica and spec.peak_rps:
        need = math.ceil(spec.peak_rps * share_after / spec.max_rps_per_replica - 1e-9)
        return max(floor, need), (
            f"{share_after:.0%} of {spec.peak_rps:g} rps at {spec.max_rps_per_replica:g} rps per replica"
        )
    own = target_replicas if weights.get(target, 0) > 0 else 0
    moved = 0.0
    parts = [f"{own} serving in {target}"]
    for region, w in weights.items():
        lost = w - after.get(region, 0)
        if region == target or lost <= 0:
            continue
        r = serving_replicas(spec, region, weights) * lost / w * part
        moved += r
        parts.append(f"{r:g} from {region}")
    return max(floor, math.ceil(own + moved - 1e-9)), " + ".join(
        parts
    ) + f", for {share_after:.0%} of traffic"


def rising(weights: dict[str, int], after: dict[str, int]) -> list[str]:
    """The regions whose weight rises from `weights` to `after`, sorted."""
    return sorted(r for r, w in after.items() if w > weights.get(r, 0))


def receivers_to_size(
    weights: dict[str, int], after: dict[str, int], target: str, receivers: list[str]
) -> list[str]:
    """The receivers of a spread, other than the target, whose weight rises: each is scaled for its
    new share. Empty for an operator's failover (no receivers): only the target is sized."""
    return [r for r in rising(weights, after) if r != target and r in receivers]


def receiver_part(weights: dict[str, int], after: dict[str, int], region: str) -> float:
    """The fraction of the moved weight `region` receives: its rise over every region's rise (0 when
    its weight does not rise; 1 when nothing rises, so nothing is shared out)."""
    gains = {r: after[r] - weights.get(r, 0) for r in rising(weights, after)}
    total = sum(gains.values())
    return gains.get(region, 0) / total if total > 0 else 1.0


def plan_receivers(
    spec: FleetSpec,
    weights: dict[str, int],
    after: dict[str, int],
    target: str,
    caps: dict[str, Capacity],
) -> dict[str, ReceiverReplicas]:
    """The replicas each receiver other than the target needs for the share it gains in a spread.

    Only a receiver whose weight rises is sized, by the target's rule (`needed_replicas`) for its
    part of the moved weight, and capped by its own max_replicas; it never scales down. A receiver
    without a capacity reading in `caps` is left out (nothing known to size it from). A shortfall
    is reported, never a refusal: the receiver takes only part of the share.
    """
    out: dict[str, ReceiverReplicas] = {}
    for region in rising(weights, after):
        cap = caps.get(region)
        if region == target or cap is None:
            continue
        part = receiver_part(weights, after, region)
        needed, sizing = needed_replicas(spec, weights, after, region, cap.replicas, part=part)
        planned = max(cap.replicas, min(needed, cap.max_replicas))
        out[region] = ReceiverReplicas(
            before=cap.replicas,
            needed=needed,
            planned=planned,
            max_replicas=cap.max_replicas,
            share_after=round(_share(after, region), 4),
            sizing=sizing,
            shortfall=max(0, needed - planned),
        )
    return out


def target_problem(probe: RegionProbe | None, emergency: bool, fail_on_degraded: bool) -> str | None:
    """Why the target's probe refuses a failover, if it does (None when it was not probed)."""
    if probe is None:
        return None
    # Emergency mode accepts a slow target (anything beats a dead source) but never a dead one.
    # Normal mode judges the target as the monitor does (probe_passes).
    if probe.status is ProbeStatus.DOWN or (not emergency and not probe_passes(probe, fail_on_degraded)):
        return f"target {probe.region} is {probe.status.value}: {probe.reason} (use --force to override)"
    return None


def plan_failover(
    spec: FleetSpec,
    weights: dict[str, int],
    target: str,
    source: str | None,
    cap: Capacity,
    *,
    emergency: bool,
    force: bool,
    target_issue: str | None = None,
    after: dict[str, int] | None = None,
    spread: bool = False,
) -> FailoverPlan:
    """The whole failover plan from what preflight read; the workflow and `--dry-run` both use it.

    Capacity never refuses an emergency failover: it shifts, scales as far as max_replicas allows,
    and the plan's `shortfall` reports the replicas it could not get. A normal failover refuses a
    target that cannot reach the replicas it needs, unless forced.

    `after`: the weights after, placed by the caller (the monitor's spread over several receivers,
    workflows/failover_phases.py); default: every source's share onto the target.

    `spread`: other receivers take part of the moved weight, and are sized for it themselves
    (`plan_receivers`, once the workflow has read their capacity), so the target is sized for its
    own part only (`receiver_part`). False: the target is sized for all the moved weight (an
    operator's failover, and a spread recorded before receivers were scaled).
    """
    sources = [source] if source else [r for r, w in weights.items() if r != target and w > 0]
    if after is None:
        after = dict(weights)
        for s in sources:
            after = shift_weights(after, s, target)
    problems: list[str] = []
    if source == target:
        problems.append("source and target are the same region")
    if target_issue:
        problems.append(target_issue)
    part = receiver_part(weights, after, target) if spread else 1.0
    needed, sizing = needed_replicas(spec, weights, after, target, cap.replicas, part=part)
    planned = max(cap.replicas, min(needed, cap.max_replicas))
    ok = cap.max_replicas >= needed
    if not ok and not emergency and not force:
        problems.append(
            f"target {target} cannot carry its {_share(after, target):.0%} share after the shift: needs {needed} "
            f"replicas ({sizing}), max_replicas {cap.max_replicas}, now {cap.replicas} "
            "(use --force to shift anyway, or --emergency)"
        )
    return FailoverPlan(
        source=",".join(sources) or None,
        target=target,
        weights_before=weights,
        weights_after=after,
        target_replicas_before=cap.replicas,
        target_replicas_needed=needed,
        target_replicas_planned=planned,
        max_replicas=cap.max_replicas,
        capacity_ok=ok,
        mode="emergency" if emergency else "normal",
        problems=problems,
        target_share_after=round(_share(after, target), 4),
        sizing=sizing,
        shortfall=max(0, needed - planned),
    )


def capacity_of(
    region: str,
    deployment: str,
    replicas: int,
    ready_replicas: int,
    config_max: int,
    hpa_min: int | None,
    hpa_max: int | None,
) -> Capacity:
    """A region's capacity: the HPA's max is the platform's own bound, the config's is drctl's; the
    tighter one wins."""
    return Capacity(
        region=region,
        deployment=deployment,
        replicas=replicas,
        ready_replicas=ready_replicas,
        max_replicas=min(config_max, hpa_max or config_max),
        hpa_min_replicas=hpa_min,
        hpa_max_replicas=hpa_max,
    )


def probe_passes(probe: RegionProbe, fail_on_degraded: bool) -> bool:
    """Whether one check counts as good for the region state machine."""
    if probe.status in (ProbeStatus.DOWN, ProbeStatus.AUTH):
        return False  # AUTH: health unknown, so never counted good (the monitor skips it instead)
    if probe.status is ProbeStatus.DEGRADED and fail_on_degraded:
        # Only what users see counts: replicas failing behind a gateway that still serves well is
        # lost capacity the platform replaces (a flapping replica), not a reason to move traffic.
        return probe.gateway.status is ProbeStatus.HEALTHY
    return True


class ReceiverReplicas(BaseModel):
    """One receiver's replicas in a spread failover (the target's are FailoverPlan.target_replicas_*)."""

    before: int
    needed: int
    planned: int = Field(description="What it is scaled to: the need, capped by max_replicas, never down.")
    max_replicas: int
    share_after: float = Field(0.0, description="Fraction of the fleet's traffic it carries after.")
    sizing: str = Field("", description="How `needed` was computed (see needed_replicas).")
    shortfall: int = Field(0, description="Replicas needed beyond max_replicas: reported, never a refusal.")


class FailoverPlan(BaseModel):
    source: str | None
    target: str
    weights_before: dict[str, int]
    weights_after: dict[str, int]
    target_replicas_before: int
    target_replicas_needed: int
    target_replicas_planned: int
    max_replicas: int
    capacity_ok: bool
    mode: Literal["normal", "emergency"]
    problems: list[str] = Field(default_factory=list)
    target_share_after: float = Field(
        0.0, description="Fraction of the fleet's traffic the target carries after."
    )
    sizing: str = Field("", description="How target_replicas_needed was computed (see needed_replicas).")
    shortfall: int = Field(0, description="Replicas needed beyond what the target can scale to.")
    receivers_replicas: dict[str, ReceiverReplicas] = Field(
        default_factory=dict,
        description="A spread failover: every other receiver whose weight rises, by region, and the "
        "replicas planned for its new share (plan_receivers), filled in as the failover reads its "
        "capacity. Empty: only the target is scaled.",
    )
