"""Rollout waits by `kubectl rollout status`'s rules (pkg/polymorphichelpers/rollout_status.go).

The emulated API server runs no controller here: the tests write Deployment status through
/status, as the Deployment controller would, and count the requests a wait costs.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.platform import PlatformActivities
from drctl.models.activity_io import WaitRolloutInput
from drctl.providers.base import DeploymentState
from drctl.providers.errors import RolloutTimeout
from drctl.providers.kubernetes import MERGE, KubernetesPlatform
from tests.support.config import one_region_config
from tests.support.kube_cluster import NS, RbacCluster, deployment_manifest
from tests.support.wait import wait_until

TIMED_OUT = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
             "message": 'ReplicaSet "llm-green-5d4f" has timed out progressing.'}  # fmt: skip


def _status(p: KubernetesPlatform, name: str, **status: Any) -> None:
    p.apps.patch_namespaced_deployment_status(name, NS, {"status": status}, _content_type=MERGE)


def _stale_verdict(p: KubernetesPlatform, name: str) -> DeploymentState:
    """A Deployment whose controller gave up on generation 1, and whose spec has moved on since."""
    p.delete_deployment(name)
    manifest = deployment_manifest(name, 2)
    manifest["spec"]["progressDeadlineSeconds"] = 1  # shorter than the waits: they bound it here
    first = p.apply_deployment(manifest)
    _status(p, name, observedGeneration=first.generation, replicas=2, updatedReplicas=1, readyReplicas=1,
            availableReplicas=1, conditions=[TIMED_OUT])  # fmt: skip
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.7.1"
    p.apply_deployment(manifest)
    state = p.get_deployment(name)
    assert state.observed_generation < state.generation
    return state


def test_a_deadline_verdict_on_the_previous_generation_is_not_honoured(platform: KubernetesPlatform) -> None:
    state = _stale_verdict(platform, "llm-green")
    seen: list[DeploymentState] = []
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(platform.wait_rollout, "llm-green", 20.0, seen.append)
        wait_until(lambda: len(seen) >= 2, timeout_s=5, what="two polls of the waiting rollout")
        assert not fut.done(), "the stale ProgressDeadlineExceeded ended the wait"
        # The controller observes the new spec and rolls it out.
        _status(platform, "llm-green", observedGeneration=state.generation, replicas=2, updatedReplicas=2,
                readyReplicas=2, availableReplicas=2,
                conditions=[{**TIMED_OUT, "status": "True", "reason": "NewReplicaSetAvailable"}])  # fmt: skip
        done = fut.result(timeout=10)
    assert done.rolled_out and done.observed_generation == state.generation


def test_the_deadline_follows_progress_deadline_seconds_and_the_load_time(
    platform: KubernetesPlatform,
) -> None:
    platform.delete_deployment("llm-canary")
    manifest = deployment_manifest("llm-canary", 2)
    manifest["spec"]["progressDeadlineSeconds"] = 1
    platform.apply_deployment(manifest)
    with pytest.raises(RolloutTimeout) as info:
        platform.wait_rollout("llm-canary", 0.1, load_allowance_s=0.5)
    assert info.value.timeout_s == 1.5
    assert "(progressDeadlineSeconds 1 + model load 0.5s)" in str(info.value)
    with pytest.raises(RolloutTimeout) as capped:
        platform.wait_rollout("llm-canary", 0.1, load_allowance_s=0.5, max_timeout_s=0.3)
    assert capped.value.timeout_s == 0.3


def test_a_wait_activity_neither_spins_nor_honours_a_stale_verdict(
    cluster: tuple[RbacCluster, str], platform: KubernetesPlatform
) -> None:
    """Its requests are bounded: one HPA list, GETs backing off to one per poll interval."""
    emulator, url = cluster
    _stale_verdict(platform, "llm-blue")
    cfg = one_region_config("roll", "http://127.0.0.1:1", f"{{api_url: '{url}', namespace: {NS}}}", "")
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, start_to_close_timeout=timedelta(seconds=60))
    before = emulator.served.copy()
    with pytest.raises(ApplicationError) as info:
        env.run(
            PlatformActivities(cfg).wait_rollout,
            WaitRolloutInput(region="us-west-1", timeout_s=2.0, deployment="llm-blue"),
        )
    assert info.value.type == "RolloutTimeout" and info.value.non_retryable
    assert "not rolled out after 2s" in str(info.value) and "observedGeneration 1 < generation 2" in str(
        info.value
    )
    gets = emulator.served["get", "deployments"] - before["get", "deployments"]
    lists = emulator.served["list", "horizontalpodautoscalers"] - before["list", "horizontalpodautoscalers"]
    # 2 s of polls backing off from 1/8 s to 2 s: 1/8, 3/8, 7/8, 15/8 and the deadline.
    assert 2 <= gets <= 8, f"{gets} GETs in one 2 s wait"
    assert lists == 1, f"{lists} HPA lists in one wait"


def test_a_rollout_slower_than_timeout_s_but_inside_its_progress_deadline_succeeds(
    cluster: tuple[RbacCluster, str], platform: KubernetesPlatform
) -> None:
    """A model that loads for longer than failover.rollout_timeout_s is no failure while the
    controller still sees progress: the wait follows progressDeadlineSeconds, not a fixed 120 s."""
    _, url = cluster
    platform.delete_deployment("llm-canary")
    manifest = deployment_manifest("llm-canary", 2)
    manifest["spec"]["progressDeadlineSeconds"] = 60
    state = platform.apply_deployment(manifest)
    cfg = one_region_config("roll", "http://127.0.0.1:1", f"{{api_url: '{url}', namespace: {NS}}}", "")
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, start_to_close_timeout=timedelta(seconds=60))
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(
            env.run,
            PlatformActivities(cfg).wait_rollout,
            WaitRolloutInput(region="us-west-1", timeout_s=0.2, deployment="llm-canary"),
        )
        wait_until(fut.running, timeout_s=5, what="the wait to start")
        time.sleep(1.0)  # well past timeout_s: the replicas are still loading
        assert not fut.done(), fut.exception() if fut.done() else None
        _status(platform, "llm-canary", observedGeneration=state.generation, replicas=2, updatedReplicas=2,
                readyReplicas=2, availableReplicas=2)  # fmt: skip
        done = fut.result(timeout=20)
    assert done.rolled_out
