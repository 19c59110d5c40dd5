"""The other receivers of a spread failover: each one whose weight rises is scaled for its new share.

The monitor's failover spreads the failed region's share over several receivers
(`FailoverInput.spread_over`); the target runs the steps and is scaled as before, and every other
receiver whose weight rises is read, sized (drctl/models/failover_plan.py, `plan_receivers`) and
scaled on its own region's queue, side by side with the target's scale: before the shift in a
normal failover, after it in an emergency. None of it fails the failover: a receiver takes only
part of the share, so its failed read or scale is recorded (`FailoverResult.receivers_scaled`,
a phase note), as an emergency target's shortfall is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl.models.activity_io import RegionRequest, ScaleInput, WaitRolloutInput
    from drctl.models.failover import (
        FailoverInput,
        FailoverPlan,
        FailoverResult,
        ReceiverScaled,
        plan_receivers,
        receivers_to_size,
    )
    from drctl.models.gitops import GitOpsManaged, note_all
    from workflows import calls
    from workflows.operation import Operation, cause_of

# Before this patch a spread failover sized and scaled its target alone, for all the moved weight.
SPREAD_SCALE_PATCH = "failover-spread-scale"


def to_size(inp: FailoverInput, weights: dict[str, int], after: dict[str, int]) -> list[str]:
    """The receivers other than the target to scale; empty for an operator's failover and for a
    history recorded before the patch. Checks the patch only when there is one, so an operator's
    failover records no marker."""
    regions = receivers_to_size(weights, after, inp.target, inp.spread_over())
    return regions if regions and workflow.patched(SPREAD_SCALE_PATCH) else []


async def scale_receivers(
    op: Operation,
    inp: FailoverInput,
    plan: FailoverPlan,
    res: FailoverResult,
    gitops: list[GitOpsManaged],
    regions: list[str],
) -> None:
    """Read, size and scale each of `regions` side by side, waiting for their rollouts; a failure
    is recorded, never raised. An abort (before the shift) still ends the wait."""
    done = await asyncio.gather(
        *(_scale_one(op, inp, plan, res, gitops, r) for r in regions), return_exceptions=True
    )
    raise_first(done)


def raise_first(done: Sequence[object]) -> None:
    """Raise the first exception `asyncio.gather(..., return_exceptions=True)` returned, if any: the
    gather has let every other call finish first, so none is left running behind the failover."""
    for x in done:
        if isinstance(x, BaseException):
            raise x


async def _scale_one(
    op: Operation,
    inp: FailoverInput,
    plan: FailoverPlan,
    res: FailoverResult,
    gitops: list[GitOpsManaged],
    region: str,
) -> None:
    # Its own queue: the target's worker may not reach another region's cluster.
    queue = inp.spec.region(region).queue
    try:
        cap = await op.abortable(
            calls.get_capacity(RegionRequest(region=region), queue=queue, summary=f"capacity of {region}")
        )
        sized = plan_receivers(inp.spec, plan.weights_before, plan.weights_after, inp.target, {region: cap})
        need = sized[region]
        plan.receivers_replicas[region] = need
        if need.planned <= need.before:
            res.receivers_scaled[region] = ReceiverScaled(replicas=need.before)
            return
        n = need.planned
        scaled = await op.abortable(
            calls.scale_deployment(
                ScaleInput(region=region, replicas=n), queue=queue, summary=f"scale {region} to {n}"
            )
        )
        # Argo CD's self-heal puts spec.replicas back unless the Application ignores it.
        note_all(gitops, scaled.scale_changes())
        st = await op.abortable(
            calls.wait_rollout(
                WaitRolloutInput(region=region, timeout_s=inp.spec.rollout_timeout_s),
                queue=queue,
                summary=f"wait for {n} ready replicas in {region}",
            )
        )
        res.receivers_scaled[region] = ReceiverScaled(replicas=st.replicas)
        op.phases.note(f"{region} replicas", f"{need.before} → {st.replicas} ({need.sizing})")
    except (ActivityError, ApplicationError) as exc:
        # It takes only part of the share: it serves on the replicas it has, and the failover goes on.
        res.receivers_scaled[region] = ReceiverScaled(error=cause_of(exc))
        op.phases.note(f"{region} replicas", f"not scaled: {cause_of(exc)}")
