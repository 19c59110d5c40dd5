"""A global tier that loses the failover's weights while the failover verifies them (restarted with
its config weights, or edited by hand) gets them back at once, on a Temporal dev server with
stand-in activities (the dev-stack test of the same case is the monitor's reconcile, after the
failover: tests/workflows/test_breakglass.py).

Before, verification only waited for its deadline (verify_timeout_s plus the TTL) with the tier
sending the drained region its config share, and then failed the failover.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from drctl.models.activity_io import SetWeightsInput, VerifyInput, VerifyResult, Weights
from drctl.models.traffic import WeightsApplied
from tests.workflows.test_failover_spread import Fleet, _failover, _markers
from workflows.failover_phases import MAX_REASSERTS, VERIFY_REASSERT_PATCH

CONFIG = {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}
MOVED = {"us-west-1": 80, "us-east-1": 0, "eu-west-1": 20}


@dataclass
class RestartingTier(Fleet):
    """The Fleet whose global tier restarts with its config weights `restarts` times, each on the
    verify attempt after a shift; the source either answers (alive) or fails every request (dead)."""

    restarts: int = 1
    source_dead: bool = False
    flaky: int = 0  # verify attempts that see one failed request at the target, the tier untouched
    reads: int = 0

    def traffic(self) -> list[str]:
        """What happened to the global weights, in order."""
        return [e for e in self.log if e.startswith(("set", "restart"))]

    def activities(self) -> list[Any]:
        acts = {activity._Definition.must_from_callable(a).name: a for a in super().activities()}

        @activity.defn(name="get_global_weights")
        async def get_global_weights() -> Weights:
            self.reads += 1
            return Weights(weights=dict(self.weights))

        @activity.defn(name="set_global_weights")
        async def set_global_weights(inp: SetWeightsInput) -> WeightsApplied:
            self.log.append(f"set {inp.weights}")
            self.weights = dict(inp.weights)
            return WeightsApplied(weights=dict(inp.weights))

        @activity.defn(name="verify_global")
        async def verify_global(inp: VerifyInput) -> VerifyResult:
            if self.restarts > 0 and self.weights != CONFIG:
                self.restarts -= 1
                self.log.append("restart")
                self.weights = dict(CONFIG)
            share = {r: inp.requests * w // 100 for r, w in self.weights.items()}
            if self.flaky > 0:
                self.flaky -= 1
                share["us-west-1"] -= 1
                by_region = {r: n for r, n in share.items() if n}
                return VerifyResult(total=inp.requests, ok=inp.requests - 1, errors=1, by_region=by_region)
            if self.source_dead:
                failed = share.pop("us-east-1", 0)
                ok = inp.requests - failed
                return VerifyResult(
                    total=inp.requests, ok=ok, errors=failed, by_region={r: n for r, n in share.items() if n}
                )
            return VerifyResult(
                total=inp.requests, ok=inp.requests, errors=0, by_region={r: n for r, n in share.items() if n}
            )

        acts.update(
            get_global_weights=get_global_weights,
            set_global_weights=set_global_weights,
            verify_global=verify_global,
        )
        return list(acts.values())


async def test_weights_lost_mid_verify_to_a_live_source_are_reapplied_and_the_failover_succeeds(
    temporal_env: WorkflowEnvironment,
) -> None:
    fleet = RestartingTier()
    res, history = await _failover(temporal_env.client, fleet, force=True)
    assert res.status == "succeeded", res.error
    assert fleet.traffic() == [f"set {MOVED}", "restart", f"set {MOVED}"], fleet.log
    assert fleet.weights == MOVED and res.weights_after == MOVED
    assert [c.weights for c in res.changes] == [MOVED, MOVED]
    assert VERIFY_REASSERT_PATCH in _markers(history)
    assert res.verify is not None and res.verify.served_by(["us-east-1"]) == 0


async def test_weights_lost_mid_verify_to_a_dead_source_are_reapplied(
    temporal_env: WorkflowEnvironment,
) -> None:
    fleet = RestartingTier(source_dead=True)
    res, _ = await _failover(temporal_env.client, fleet, force=True, emergency=True)
    assert res.status == "succeeded", res.error
    assert fleet.weights == MOVED and fleet.traffic() == [f"set {MOVED}", "restart", f"set {MOVED}"]


async def test_a_tier_that_keeps_losing_them_is_reapplied_a_bounded_number_of_times(
    temporal_env: WorkflowEnvironment,
) -> None:
    fleet = RestartingTier(restarts=MAX_REASSERTS + 5)
    quick = {"verify_timeout_s": 5, "global_ttl_s": 0}
    with pytest.raises(WorkflowFailureError) as failed:
        await _failover(temporal_env.client, fleet, spec_over=quick, force=True)
    # Re-applied MAX_REASSERTS times, then verification fails as before: the weights are not the failover's.
    assert fleet.traffic().count(f"set {MOVED}") == 1 + MAX_REASSERTS, fleet.log
    assert "verification failed" in str(failed.value.cause)


async def test_a_verify_that_fails_for_another_reason_reads_the_weights_and_changes_nothing(
    temporal_env: WorkflowEnvironment,
) -> None:
    fleet = RestartingTier(restarts=0, flaky=1)
    res, _ = await _failover(temporal_env.client, fleet, force=True)
    assert res.status == "succeeded", res.error
    assert fleet.reads == 2, fleet.reads  # the preflight's, and the check after the failed attempt
    assert fleet.traffic() == [f"set {MOVED}"]
