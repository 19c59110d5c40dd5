"""`DeploymentState.missing()` (what the wait names, and what `rolled_out` derives from) follows
kubectl's `rollout status` (pkg/polymorphichelpers/rollout_status.go), old replicas pending termination
included."""

from __future__ import annotations

from drctl.providers.base import DeploymentState


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
    assert state.missing() == "1 old replicas pending termination"
    done = state.model_copy(update={"status_replicas": 2, "ready_replicas": 2, "available_replicas": 2})
    assert done.rolled_out and done.missing() is None
