"""Capacity in weight points: how much share a region can carry, and how share is spread.

A weight point is 1 % of the fleet's offered load. With the load each region carries and its weight,
the load one point brings is known (`load_per_point`), and a region's usable capacity converts to
the points it can carry (`usable_points`). Replaces models/capacity.py's usable/headroom arithmetic.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from drctl.decision.config import DecisionConfig
from drctl.decision.evidence import RegionEvidence

# Less load than this says nothing of what a point weighs (an idle fleet): capacity unknown.
MIN_LOAD = 1e-6
# The stopping rule of the level search (`level_fill`): far below a point's rounding.
_LEVEL_STEPS = 200


def usable(region: RegionEvidence, config: DecisionConfig) -> float | None:
    """Ready replicas x per-replica capacity x target utilisation; None when unknown."""
    cap = region.capacity
    if cap is None or cap.per_replica is None:
        return None
    return cap.ready * cap.per_replica * config.target_utilisation


def load_per_point(
    regions: Mapping[str, RegionEvidence], weights: Mapping[str, int], serving: Collection[str]
) -> float | None:
    """The load one weight point brings, from the `serving` regions whose load is read (a dead
    region's read load is not what its share offers); None if none is."""
    loads = [
        (r.capacity.load, weights.get(name, 0))
        for name, r in regions.items()
        if name in serving
        and r.capacity is not None
        and r.capacity.load is not None
        and weights.get(name, 0) > 0
    ]
    total_weight = sum(w for _, w in loads)
    total_load = sum(load for load, _ in loads)
    if total_weight <= 0 or total_load < MIN_LOAD:
        return None
    return total_load / total_weight


def usable_points(
    regions: Mapping[str, RegionEvidence],
    weights: Mapping[str, int],
    config: DecisionConfig,
    serving: Collection[str],
) -> dict[str, float]:
    """Region -> the share it can carry within usable capacity, where known (`load_per_point`)."""
    return points_at(regions, load_per_point(regions, weights, serving), config)


def points_at(
    regions: Mapping[str, RegionEvidence], per_point: float | None, config: DecisionConfig
) -> dict[str, float]:
    """Region -> the share it can carry within usable capacity when a point brings `per_point`."""
    if per_point is None:
        return {}
    out = {}
    for name, r in regions.items():
        room = usable(r, config)
        if room is not None:
            out[name] = room / per_point
    return out


def spread(
    amount: float,
    base: Mapping[str, float],
    receivers: list[str],
    capacity: Mapping[str, float],
    home: Mapping[str, int],
) -> dict[str, float]:
    """`amount` points added over `receivers`, as floats (the weights of the others unchanged).

    With every receiver's capacity known: in proportion to headroom (capacity - share), which never
    takes one past its capacity; what no headroom holds is spread so every receiver ends at the same
    fraction of its capacity (none lowered). Otherwise in proportion to home weights, each known one
    capped at its capacity while another can take more.
    """
    out = dict(base)
    if amount <= 0 or not receivers:
        return out
    if all(r in capacity for r in receivers):
        room = {r: max(0.0, capacity[r] - base[r]) for r in receivers}
        total_room = sum(room.values())
        if amount <= total_room:
            for r in receivers:
                out[r] = base[r] + amount * room[r] / total_room
            return out
        if sum(capacity[r] for r in receivers) > 0:
            return {**out, **level_fill(sum(base[r] for r in receivers) + amount, base, receivers, capacity)}
    keys = {r: float(home.get(r, 0)) for r in receivers}
    if sum(keys.values()) <= 0:
        keys = dict.fromkeys(receivers, 1.0)
    return {**out, **_capped_fill(amount, base, keys, capacity)}


def place(
    base: Mapping[str, int],
    amounts: Mapping[str, float],
    receivers: list[str],
    capacity: Mapping[str, float],
    home: Mapping[str, int],
) -> dict[str, int]:
    """The weights `base` with `amounts` taken off their regions and spread over `receivers`
    (`spread`), as integers summing to 100 (`largest_remainder`). Every rule that moves share, and
    the Failover workflow placing a failed region's share, place it with this."""
    floats = {r: float(w) for r, w in base.items()}
    for r, a in amounts.items():
        floats[r] -= a
    return largest_remainder(spread(sum(amounts.values()), floats, receivers, capacity, home))


def level_fill(
    total: float, base: Mapping[str, float], receivers: list[str], capacity: Mapping[str, float]
) -> dict[str, float]:
    """Receivers' shares summing to `total`: each max(its base, level x capacity), one level for all.

    The level is found by bisection: share(level) grows with it, from sum(base) at 0.
    """
    low, high = 0.0, total / sum(capacity[r] for r in receivers)
    for _ in range(_LEVEL_STEPS):
        mid = (low + high) / 2
        if sum(max(base[r], mid * capacity[r]) for r in receivers) < total:
            low = mid
        else:
            high = mid
    shares = {r: max(base[r], high * capacity[r]) for r in receivers}
    # Bisection leaves a sliver off `total`; the lifted receivers absorb it in proportion.
    lifted = [r for r in receivers if shares[r] > base[r]] or receivers
    excess = sum(shares.values()) - total
    lifted_total = sum(shares[r] for r in lifted)
    for r in lifted:
        shares[r] -= excess * shares[r] / lifted_total if lifted_total > 0 else excess / len(lifted)
    return shares


def _capped_fill(
    amount: float, base: Mapping[str, float], keys: Mapping[str, float], capacity: Mapping[str, float]
) -> dict[str, float]:
    """`amount` over `keys`' regions in proportion to the keys, each capped at its known capacity
    while another is open; when all are capped, what is left goes by the keys alone."""
    shares = {r: base[r] for r in keys}
    left = amount
    open_ = [r for r in keys if shares[r] < capacity.get(r, float("inf"))]
    while left > 1e-9 and open_:
        # Open regions whose keys are all zero share equally rather than not at all.
        share_keys = (
            {r: keys[r] for r in open_} if sum(keys[r] for r in open_) > 0 else dict.fromkeys(open_, 1.0)
        )
        total_key = sum(share_keys.values())
        round_left = left
        for r in open_:
            take = min(round_left * share_keys[r] / total_key, capacity.get(r, float("inf")) - shares[r])
            shares[r] += take
            left -= take
        open_ = [r for r in open_ if shares[r] < capacity.get(r, float("inf")) - 1e-9]
    if left > 1e-9:
        total_key = sum(keys.values())
        for r in keys:
            shares[r] += left * keys[r] / total_key
    return shares


def largest_remainder(shares: Mapping[str, float]) -> dict[str, int]:
    """Integers summing to exactly 100, in proportion to `shares` (Hamilton's method).

    A zero share stays zero. Ties go to the larger share, then the name, so the result is the same
    on every run. All-zero shares stay all zero (the caller never asks for that).
    """
    total = sum(v for v in shares.values() if v > 0)
    if total <= 0:
        return dict.fromkeys(shares, 0)
    exact = {k: max(v, 0.0) * 100 / total for k, v in shares.items()}
    out = {k: int(v) for k, v in exact.items()}
    left = 100 - sum(out.values())
    order = sorted(exact, key=lambda k: (-(exact[k] - out[k]), -exact[k], k))
    for k in order[:left]:
        out[k] += 1
    return out
