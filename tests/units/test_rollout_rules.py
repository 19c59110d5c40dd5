"""`DeploymentState.rolled_out` and the wait's list of what is missing follow one rule set: kubectl's
`rollout status` (pkg/polymorphichelpers/rollout_status.go), old replicas pending termination included."""

from __future__ import annotations

import itertools

from drctl.providers.base import DeploymentState
from drctl.providers.kubernetes import KubernetesPlatform


def _state(**counts: int) -> DeploymentState:
    return DeploymentState(name="vllm", namespace="inference", **counts)


def test_an_old_replica_still_running_is_not_rolled_out() -> None:
    # Two new replicas ready, the old one not yet stopped: kubectl says "1 old replicas are
    # pending termination" and keeps waiting.
    state = _state(
        generation=2,
        observed_generation=2,
        replicas=2,
        status_replicas=3,
        updated_replicas=2,
        ready_replicas=3,
        available_replicas=3,
    )
    assert not state.rolled_out
    assert KubernetesPlatform._missing(state) == "1 old replicas pending termination"
    done = state.model_copy(update={"status_replicas": 2, "ready_replicas": 2, "available_replicas": 2})
    assert done.rolled_out and KubernetesPlatform._missing(done) is None


def test_rolled_out_and_nothing_missing_agree_on_every_small_state() -> None:
    for gen, obs, spec, total, updated, ready, available in itertools.product(
        (1, 2), (1, 2), range(3), range(4), range(4), range(4), range(4)
    ):
        state = _state(
            generation=gen,
            observed_generation=obs,
            replicas=spec,
            status_replicas=total,
            updated_replicas=updated,
            ready_replicas=ready,
            available_replicas=available,
        )
        assert state.rolled_out == (KubernetesPlatform._missing(state) is None), state
