"""A spread failover sizes every receiver whose weight rises for its own part of the moved share
(drctl/models/failover_plan.py: `receivers_to_size`, `receiver_part`, `plan_receivers`), by the
target's rule, capped by its own max_replicas; an operator's failover sizes its target as before."""

from __future__ import annotations

import pytest

from drctl.models.failover import plan_failover, plan_receivers, receivers_to_size
from drctl.models.failover_plan import receiver_part
from tests.support.config import cap, spec

THREE = spec([("us-west-1", 50, 2), ("us-east-1", 30, 2), ("eu-west-1", 20, 2)])
W3 = {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}
# us-east-1's 30 points by configured weight (tests/units/test_failover_placement.py): 21 and 9.
SPREAD3 = {"us-west-1": 71, "us-east-1": 0, "eu-west-1": 29}
RECEIVERS3 = ["eu-west-1", "us-west-1"]


def test_two_regions_the_target_is_the_only_receiver_and_no_other_is_sized() -> None:
    w = {"w": 60, "e": 40}
    assert receivers_to_size(w, {"w": 100, "e": 0}, "w", ["w"]) == []
    assert receiver_part(w, {"w": 100, "e": 0}, "w") == 1.0


def test_three_regions_each_receiver_is_sized_for_its_part_of_the_moved_share() -> None:
    assert receivers_to_size(W3, SPREAD3, "us-west-1", RECEIVERS3) == ["eu-west-1"]
    assert receiver_part(W3, SPREAD3, "us-west-1") == pytest.approx(0.7)
    assert receiver_part(W3, SPREAD3, "eu-west-1") == pytest.approx(0.3)
    got = plan_receivers(THREE, W3, SPREAD3, "us-west-1", {"eu-west-1": cap("eu-west-1", 2)})
    need = got["eu-west-1"]
    # Its 2, plus 30 % of the 2 replicas that served us-east-1's share: 2.6, rounded up.
    assert (need.before, need.needed, need.planned, need.shortfall) == (2, 3, 3, 0)
    assert need.share_after == 0.29 and "0.6 from us-east-1" in need.sizing
    plan = plan_failover(
        THREE,
        W3,
        "us-west-1",
        "us-east-1",
        cap("us-west-1", 2),
        emergency=True,
        force=False,
        after=SPREAD3,
        spread=True,
    )
    # The target: its 2 plus 70 % of us-east-1's 2.
    assert plan.target_replicas_needed == 4 and "1.4 from us-east-1" in plan.sizing
    assert plan.receivers_replicas == {}  # filled in by the workflow once it has read each receiver


def test_a_receiver_whose_weight_does_not_rise_is_not_sized_nor_counted() -> None:
    # The headroom case: us-west-1 has no room and keeps its 34; eu-west-1 takes all 38 points.
    w = {"us-west-1": 34, "us-east-1": 38, "eu-west-1": 28}
    after = {"us-west-1": 34, "us-east-1": 0, "eu-west-1": 66}
    assert receivers_to_size(w, after, "us-west-1", RECEIVERS3) == ["eu-west-1"]
    assert receivers_to_size(w, after, "eu-west-1", RECEIVERS3) == []
    spread = plan_failover(
        THREE,
        w,
        "us-west-1",
        "us-east-1",
        cap("us-west-1", 1),
        emergency=True,
        force=False,
        after=after,
        spread=True,
    )
    # The target takes none of the share, so is not scaled for it (sized alone: for all 38 points).
    assert spread.target_replicas_needed == 1 and spread.target_replicas_planned == 1
    alone = plan_failover(
        THREE, w, "us-west-1", "us-east-1", cap("us-west-1", 1), emergency=True, force=False, after=after
    )
    assert alone.target_replicas_needed == 4
    # eu-west-1 gets all of us-east-1's serving replicas (2 × 38/30), on top of its own 2.
    got = plan_receivers(THREE, w, after, "us-west-1", {"eu-west-1": cap("eu-west-1", 2)})
    assert got["eu-west-1"].needed == 5
    # A receiver with no capacity reading is left out, and the target never appears.
    assert plan_receivers(THREE, w, after, "us-west-1", {"us-west-1": cap("us-west-1", 1)}) == {}


def test_max_replicas_caps_a_receiver_and_the_shortfall_is_reported_not_refused() -> None:
    w = {"us-west-1": 34, "us-east-1": 38, "eu-west-1": 28}
    after = {"us-west-1": 34, "us-east-1": 0, "eu-west-1": 66}
    short = plan_receivers(THREE, w, after, "us-west-1", {"eu-west-1": cap("eu-west-1", 2, max_replicas=4)})
    need = short["eu-west-1"]
    assert (need.needed, need.planned, need.max_replicas, need.shortfall) == (5, 4, 4, 1)
    # Its own replicas count as they are (7 + 2.5), and the cap is max_replicas (8).
    big = plan_receivers(THREE, w, after, "us-west-1", {"eu-west-1": cap("eu-west-1", 7)})
    assert (big["eu-west-1"].needed, big["eu-west-1"].planned) == (10, 8)
    # Never down: a receiver past a lowered max_replicas keeps what it has.
    past = plan_receivers(THREE, w, after, "us-west-1", {"eu-west-1": cap("eu-west-1", 6, max_replicas=4)})
    assert (past["eu-west-1"].planned, past["eu-west-1"].before) == (6, 6)
    # At max_replicas already, nothing to add.
    full = plan_receivers(THREE, w, after, "us-west-1", {"eu-west-1": cap("eu-west-1", 3, max_replicas=3)})
    assert full["eu-west-1"].planned == 3 and full["eu-west-1"].shortfall == 3  # needs 3 + 2.5
    # A normal failover is not refused for a receiver's shortfall: problems are the target's alone.
    plan = plan_failover(
        THREE,
        w,
        "us-west-1",
        "us-east-1",
        cap("us-west-1", 1),
        emergency=False,
        force=False,
        after=after,
        spread=True,
    )
    assert plan.problems == []


def test_five_regions_the_parts_add_up_to_the_moved_share_and_a_non_receiver_is_left_alone() -> None:
    s = spec([("a", 40, 4), ("b", 20, 2), ("c", 20, 2), ("d", 10, 1), ("e", 10, 1)])
    w = {"a": 40, "b": 20, "c": 20, "d": 10, "e": 10}
    after = {"a": 0, "b": 36, "c": 36, "d": 18, "e": 10}  # e is not a receiver (SUSPECT, say)
    receivers = ["b", "c", "d"]
    assert receivers_to_size(w, after, "b", receivers) == ["c", "d"]
    parts = {r: receiver_part(w, after, r) for r in w}
    assert parts == pytest.approx({"a": 0.0, "b": 0.4, "c": 0.4, "d": 0.2, "e": 0.0})
    caps = {r: cap(r, n) for r, n in (("c", 2), ("d", 1), ("e", 1))}
    got = plan_receivers(s, w, after, "b", caps)
    assert sorted(got) == ["c", "d"]  # e's weight does not rise: not sized, even with a reading
    # a's 4 replicas move with its share: 40 % (1.6) to c, 20 % (0.8) to d.
    assert {r: n.needed for r, n in got.items()} == {"c": 4, "d": 2}
    target = plan_failover(s, w, "b", "a", cap("b", 2), emergency=True, force=False, after=after, spread=True)
    assert target.target_replicas_needed == 4  # 2 + 1.6
    # Not a spread: each would have been sized for all of a's 4 replicas (2 + 4 = 6 each).
    assert (
        plan_failover(
            s, w, "b", "a", cap("b", 2), emergency=True, force=False, after=after
        ).target_replicas_needed
        == 6
    )


def test_by_rate_a_receiver_is_sized_for_its_share_of_the_peak() -> None:
    s = spec(
        [("us-west-1", 50, 2), ("us-east-1", 30, 2), ("eu-west-1", 20, 2)],
        max_rps_per_replica=10,
        peak_rps=100,
    )
    got = plan_receivers(s, W3, SPREAD3, "us-west-1", {"eu-west-1": cap("eu-west-1", 2)})
    assert got["eu-west-1"].needed == 3  # ceil(100 × 29 % / 10)
    assert "29% of 100 rps" in got["eu-west-1"].sizing


def test_an_operators_failover_is_planned_as_before() -> None:
    s = spec([("a", 50, 5), ("b", 30, 3), ("c", 20, 2)])
    w = {"a": 50, "b": 30, "c": 20}
    for source in ("a", None):
        plan = plan_failover(s, w, "c", source, cap("c", 2), emergency=True, force=False)
        # No receivers: nothing else is sized, and the target counts every moved replica.
        assert receivers_to_size(w, plan.weights_after, "c", []) == []
        assert plan.receivers_replicas == {}
        assert plan.target_replicas_needed == (7 if source else 10)
        # All the moved weight goes to the target alone: sized as a spread, its part is 1, the same plan.
        assert receiver_part(w, plan.weights_after, "c") == 1.0
        same = plan_failover(
            s, w, "c", source, cap("c", 2), emergency=True, force=False, after=plan.weights_after, spread=True
        )
        assert same == plan
