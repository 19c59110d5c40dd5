"""Kubernetes API faults: 409, 429 with Retry-After, 500, a list that never answers, and 403.

A real emulated API server (drctl.devstack.kube) sits behind a loopback fault proxy. The provider
is checked for the classification (retryable or not, which resource and verb), and the product's
own activity under its own retry policy (`workflows.calls.scale_deployment`, PLATFORM_RETRY) on a real Temporal dev
server is checked for what an operator sees: attempts, the backoff between them, the final error.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kmock import Server
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities import platform as platform_activities
from drctl.config.schema import FleetConfig, KubeConfig, RegionConfig, parse_config
from drctl.devstack.kube import RegionCluster
from drctl.models.activity_io import DeploymentStatus, ScaleInput
from drctl.providers.errors import ProviderError
from drctl.providers.kube_client import api_client_for
from drctl.providers.kubernetes import KubernetesPlatform
from tests.support.fault_proxy import Fault, KubeFaultProxy, serve
from tests.support.loop_thread import LoopThread
from tests.support.ports import free_port
from tests.support.temporal import execute_once
from workflows import calls
from workflows.calls import PLATFORM_RETRY

NS = "inference"
REGION = "us-west-1"
SCALE_PATH = rf"/apis/apps/v1/namespaces/{NS}/deployments/llm-stable/scale"
HPA_LIST = rf"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers"


class Stack:
    def __init__(self) -> None:
        self.lt = LoopThread()
        port, proxy_port = free_port(), free_port()

        async def make() -> RegionCluster:
            return RegionCluster()

        self.cluster = self.lt.run(make())
        self.lt.enter(self.cluster)
        self.lt.enter(Server(self.cluster, host="127.0.0.1", port=port))
        self.proxy = KubeFaultProxy(f"http://127.0.0.1:{port}")
        self.runner = self.lt.run(serve(self.proxy, proxy_port))
        self.url = f"http://127.0.0.1:{proxy_port}"
        self.lt.run(self._seed())

    async def _seed(self) -> None:
        labels = {"app": "llm", "drctl.io/track": "stable"}
        await self.cluster.ensure("v1/namespaces", {"metadata": {"name": NS}})
        await self.cluster.ensure(
            "apps/v1/deployments",
            {
                "metadata": {"name": "llm-stable", "namespace": NS, "labels": labels},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "server", "image": "vllm/vllm-openai:v1"}]},
                    },
                },
            },
        )

    def close(self) -> None:
        self.lt.run(self.runner.cleanup())
        self.lt.close()


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    s = Stack()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def clean_faults(stack: Stack) -> None:
    stack.proxy.faults.clear()


def _region(stack: Stack) -> RegionConfig:
    return RegionConfig(
        name=REGION,
        weight=60,
        max_replicas=8,
        gateway_url="http://127.0.0.1:1",
        kube=KubeConfig(api_url=stack.url, namespace=NS),
    )


def _platform(stack: Stack, timeout: tuple[float, float] = (5.0, 30.0)) -> KubernetesPlatform:
    return KubernetesPlatform(_region(stack), poll_interval_s=0.05, request_timeout=timeout)


@pytest.mark.parametrize(("status", "kind"), [(409, "Conflict"), (429, "RateLimited"), (500, "ServerError")])
def test_transient_statuses_are_retryable_and_name_the_call(stack: Stack, status: int, kind: str) -> None:
    stack.proxy.add(
        Fault("PATCH", SCALE_PATH, status=status, times=1, retry_after_s=7 if status == 429 else None)
    )
    p = _platform(stack)
    with pytest.raises(ProviderError) as err:
        p.scale("llm-stable", 3)
    e = err.value.error
    assert (e.kind, e.retryable) == (kind, True)
    assert f"patch deployments/scale {NS}/llm-stable (cluster of {REGION})" in e.message
    assert f"HTTP {status}" in e.message
    assert e.retry_after_s == (7.0 if status == 429 else None)
    assert p.scale("llm-stable", 3).replicas == 3  # the fault was transient: the next call goes through


def test_a_list_that_never_answers_ends_in_a_retryable_timeout(stack: Stack) -> None:
    stalled = stack.proxy.add(Fault("GET", HPA_LIST, status=0))
    region = _region(stack)
    p = KubernetesPlatform(region, api_client=api_client_for(region.kube), request_timeout=(2.0, 0.5))
    with pytest.raises(ProviderError) as err:
        p.get_deployment("llm-stable")
    e = err.value.error
    assert (e.kind, e.retryable) == ("Unavailable", True)
    assert f"list horizontalpodautoscalers in {NS} (cluster of {REGION})" in e.message
    assert "timed out" in e.message.lower()
    # One request, not urllib3's silent 3 retries: the call ends within one read timeout, so the
    # activity's own retry policy (with backoff) and its start-to-close stay in charge.
    assert stalled.hits == 1


# --- the activity under the product's retry policy, on a real Temporal server ----------------------


@workflow.defn(name="ScaleThroughFaults", sandboxed=False)
class ScaleThroughFaults:
    @workflow.run
    async def run(self, inp: ScaleInput) -> DeploymentStatus:
        return await calls.scale_deployment(
            inp, queue=workflow.info().task_queue, summary="scale through faults"
        )


def _config(stack: Stack) -> FleetConfig:
    return parse_config(f"""
name: faults
regions:
  - name: {REGION}
    weight: 100
    gateway_url: http://127.0.0.1:1
    kube: {{api_url: "{stack.url}", namespace: {NS}}}
traffic:
  global_endpoint: http://127.0.0.1:1
  global: {{kind: haproxy, runtime_socket: /nonexistent.sock}}
  regional: {{kind: gateway-api}}
""")


async def _scale(temporal_env: WorkflowEnvironment, stack: Stack, replicas: int) -> DeploymentStatus:
    scale = ScaleInput(region=REGION, replicas=replicas, deployment="llm-stable")
    activities = platform_activities.build(_config(stack))
    return await execute_once(temporal_env.client, ScaleThroughFaults, scale, activities, "faults", "scale")


@pytest.mark.parametrize("status", [409, 500])
async def test_activity_retries_conflicts_and_5xx_with_growing_backoff(
    temporal_env: WorkflowEnvironment, stack: Stack, status: int
) -> None:
    fault = stack.proxy.add(Fault("PATCH", SCALE_PATH, status=status, times=3))
    res = await _scale(temporal_env, stack, 4)
    assert res.replicas == 4
    assert fault.hits == 4  # three refused attempts, the fourth went through
    gaps = [b - a for a, b in zip(fault.at, fault.at[1:], strict=False)]
    # PLATFORM_RETRY doubles the interval: each wait is longer than the one before.
    assert PLATFORM_RETRY.backoff_coefficient == 2.0
    assert gaps[0] < gaps[1] < gaps[2], gaps


async def test_activity_waits_for_retry_after_on_429(temporal_env: WorkflowEnvironment, stack: Stack) -> None:
    initial = PLATFORM_RETRY.initial_interval.total_seconds() if PLATFORM_RETRY.initial_interval else 1.0
    fault = stack.proxy.add(Fault("PATCH", SCALE_PATH, status=429, times=1, retry_after_s=int(initial * 4)))
    res = await _scale(temporal_env, stack, 5)
    assert res.replicas == 5 and fault.hits == 2
    # The server's Retry-After (4 × the policy's first interval) was honoured, not the policy's interval.
    assert fault.at[1] - fault.at[0] >= initial * 4


async def test_activity_stops_at_once_on_403_naming_the_permission(
    temporal_env: WorkflowEnvironment, stack: Stack
) -> None:
    message = (
        'deployments.apps "llm-stable" is forbidden: User "system:serviceaccount:drctl:drctl" cannot patch '
        'resource "deployments/scale" in API group "apps" in the namespace "inference"'
    )
    fault = stack.proxy.add(Fault("PATCH", SCALE_PATH, status=403, message=message))
    with pytest.raises(WorkflowFailureError) as err:
        await _scale(temporal_env, stack, 6)
    assert fault.hits == 1  # non-retryable: one attempt, no retry
    act = err.value.cause
    assert isinstance(act, ActivityError) and isinstance(act.cause, ApplicationError)
    assert act.cause.type == "Forbidden" and act.cause.non_retryable
    assert 'cannot patch resource "deployments/scale"' in act.cause.message
    assert f"patch deployments/scale {NS}/llm-stable (cluster of {REGION})" in act.cause.message
    assert "RBAC" in act.cause.message
