"""The node agent's Deployment controller observes a new spec late, as a real one does.

In process, with no replicas (replicas 0 starts no fleetsim) and no usable gateway: what is
checked is the status the agent writes, read back through the API as drctl reads it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from drctl.devstack.deployment_status import deployment_status
from drctl.devstack.kube import RegionCluster, serve_cluster
from drctl.devstack.nodeagent import DEPLOYMENTS, TRACK_LABEL, NodeAgent
from drctl.providers.haproxy_runtime import HAProxyRuntime
from tests.support.ports import free_port

NS = "inference"
TIMED_OUT = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
             "message": 'ReplicaSet "llm-green-1" has timed out progressing.',
             "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip


@dataclass
class NoGateway:
    """A region gateway that is down: the agent registers nothing."""

    runtime: HAProxyRuntime
    epoch: int = 0
    usable: bool = False


@pytest.fixture
async def cluster() -> AsyncIterator[RegionCluster]:
    async with serve_cluster("127.0.0.1", free_port()) as c:
        yield c


def _deployment(image: str) -> dict[str, Any]:
    labels = {"app": "llm", TRACK_LABEL: "green"}
    return {
        "metadata": {"name": "llm-green", "namespace": NS, "labels": labels},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "server", "image": image}]}}},
    }  # fmt: skip


async def test_a_new_generation_is_observed_after_the_delay_and_old_conditions_stay_until_then(
    cluster: RegionCluster, tmp_path: Path
) -> None:
    agent = NodeAgent(cluster, "us-west-1", NoGateway(HAProxyRuntime(str(tmp_path / "none.sock"))), tmp_path)
    agent.observe_delay_s = 3600.0  # the controller is slow to see the change
    await cluster.create_object(DEPLOYMENTS, _deployment("vllm/vllm-openai:v1"))
    # The controller's verdict on generation 1: it timed out.
    await cluster.patch_object(DEPLOYMENTS, NS, "llm-green", {"status": {"observedGeneration": 1,
                               "replicas": 0, "conditions": [TIMED_OUT]}}, subresource="status")  # fmt: skip
    await cluster.patch_object(
        DEPLOYMENTS,
        NS,
        "llm-green",
        {"spec": {"template": _deployment("vllm/vllm-openai:v2")["spec"]["template"]}},
    )
    await agent.reconcile()
    dep = cluster.read_object(DEPLOYMENTS, NS, "llm-green")
    assert dep["metadata"]["generation"] == 2
    assert dep["status"]["observedGeneration"] == 1, "observed before the delay"
    assert dep["status"]["conditions"] == [TIMED_OUT], (
        "the old verdict must stay until the new spec is observed"
    )

    agent.observe_delay_s = 0.0  # the delay has passed
    await agent.reconcile()
    dep = cluster.read_object(DEPLOYMENTS, NS, "llm-green")
    assert dep["status"]["observedGeneration"] == 2
    progressing = next(c for c in dep["status"]["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] == "NewReplicaSetAvailable"  # 0 of 0 replicas: complete at once
    await agent.shutdown()


@dataclass
class Replica:
    template_hash: str
    state: str = "running"
    ready: bool = False


def test_the_progress_deadline_counts_from_the_last_progress_not_from_an_older_rollout() -> None:
    dep = _deployment("vllm/vllm-openai:v1")
    dep["metadata"]["generation"] = 1
    dep["spec"].update(replicas=2, progressDeadlineSeconds=60)
    memory: dict[str, Any] = {}

    def progressing(replicas: list[Replica]) -> str:
        status = deployment_status(dep, replicas, "h1", memory)
        return next(c["reason"] for c in status["conditions"] if c["type"] == "Progressing")

    assert progressing([Replica("h1")]) == "ReplicaSetUpdated"
    memory["progress_started"] -= 61  # a minute without progress: the controller gives up
    assert progressing([Replica("h1")]) == "ProgressDeadlineExceeded"
    dep["metadata"]["generation"] = 2  # a new spec: a new rollout, a new deadline
    assert progressing([Replica("h1")]) == "ReplicaSetUpdated"
    memory["progress_started"] -= 61
    assert progressing([Replica("h1"), Replica("h1", ready=True)]) == "ReplicaSetUpdated"  # progress
