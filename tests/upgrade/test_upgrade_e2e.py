"""Upgrades end to end on the dev stack: real clusters, gateways, fleetsim replicas, Velero, S3."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from kubernetes.client import CustomObjectsApi
from temporalio.client import Client

from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.gitops import OWNED, TRACKING_ANNOTATION
from drctl.models.upgrade import Outcome, Strategy, UpgradeResult
from drctl.providers.kube_client import api_client_for
from drctl.providers.kube_objects import MERGE
from tests.support.kubeapi import accepted_at
from tests.support.moto import aws_client
from tests.support.upgrade import (
    WeightWatch,
    deployments,
    fresh_queues,
    rolled_back_canary,
    run_upgrade,
    running_worker,
    stable_container,
    start_upgrade,
    through_routes,
    track_weights,
    upgrade_req,
)

pytestmark = pytest.mark.devstack

ERRORS = {"FLEETSIM_ERROR_RATE": "0.6"}  # fleetsim: 60 % of the canary's requests fail


@pytest.fixture(params=["haproxy", "gateway-api"])
async def tiered_env(
    request: pytest.FixtureRequest, fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> AsyncIterator[FleetConfig]:
    """The regional tier as HAProxy's runtime API, or as HTTPRoutes the dev stack's Gateway API
    controller programs (late, with status): the same upgrade must hold on both."""
    cfg = fresh_queues(fleet_config)
    with contextlib.ExitStack() as stack:
        if request.param == "gateway-api":
            cfg = stack.enter_context(through_routes(cfg))
        async with running_worker(temporal_client, cfg):
            yield cfg


async def test_good_canary_becomes_stable_region_by_region(
    tiered_env: FleetConfig, temporal_client: Client
) -> None:
    cfg = tiered_env
    image = f"vllm/vllm-openai:v0.7.{uuid.uuid4().int % 1000}"
    req = upgrade_req(cfg, image, steps_percent=[50, 100])
    watch = WeightWatch(cfg)
    res = await run_upgrade(temporal_client, cfg, req, watch)
    assert res.outcome is Outcome.SUCCEEDED, res.reason
    assert [w.region for w in res.waves] == ["us-west-1", "us-east-1"]
    assert [(r.region, r.image, r.state) for r in res.releases] == [
        ("us-west-1", image, "upgraded"),
        ("us-east-1", image, "upgraded"),
    ]
    for region in cfg.region_names:
        assert stable_container(cfg, region).image == image
        assert "llm-canary" not in deployments(cfg, region)
        assert track_weights(cfg, region)["stable"] == 100 and track_weights(cfg, region)["canary"] == 0
    # One region at a time: never a canary weight in both regions at once; both regions had one.
    assert not any(all(s[r]["canary"] > 0 for r in s) for s in watch.samples)
    assert all(any(s[r]["canary"] > 0 for s in watch.samples) for r in cfg.region_names)
    # The backup is in S3, in Velero's layout, and completed before the first canary existed.
    s3 = aws_client("s3", cfg.aws.endpoint_url)
    keys = {
        o["Key"]
        for o in s3.list_objects_v2(Bucket=cfg.backup.bucket, Prefix=f"backups/upgrade-{req.upgrade_id}-")[
            "Contents"
        ]
    }
    for region in cfg.region_names:
        name = f"upgrade-{req.upgrade_id}-{region}"
        assert {f"backups/{name}/velero-backup.json", f"backups/{name}/{name}.tar.gz"} <= keys
    assert res.backup is not None and res.backup.phase == "Completed"


async def test_bad_release_rolls_back_and_names_the_metric(
    tiered_env: FleetConfig, temporal_client: Client
) -> None:
    cfg = tiered_env
    before = stable_container(cfg, "us-west-1").image
    watch = WeightWatch(cfg)
    _, res = await rolled_back_canary(
        temporal_client, cfg, "vllm/vllm-openai:v0.8.0-bad", "us-west-1", ERRORS, [25, 50, 100], watch
    )
    assert res.failed_metric == "error_rate" and "error rate" in res.reason
    assert res.failed_region == "us-west-1"
    assert [(r.region, r.image, r.state) for r in res.releases] == [("us-west-1", before, "rolled-back")]
    # Stable never dropped below its weight before the bad (first) step: 100 - 25.
    assert min(s["us-west-1"]["stable"] for s in watch.samples) >= 75
    assert track_weights(cfg, "us-west-1")["stable"] == 100 and track_weights(cfg, "us-west-1")["canary"] == 0
    assert "llm-canary" not in deployments(cfg, "us-west-1")
    assert stable_container(cfg, "us-west-1").image == before


async def test_slow_release_fails_on_ttft(tiered_env: FleetConfig, temporal_client: Client) -> None:
    cfg = tiered_env
    slow = {"FLEETSIM_TTFT_MS": "400"}
    _, res = await rolled_back_canary(
        temporal_client, cfg, "vllm/vllm-openai:v0.8.1-slow", "us-east-1", slow, [10, 100]
    )
    assert res.failed_metric in ("ttft_p99", "ttft_p50"), res
    assert "llm-canary" not in deployments(cfg, "us-east-1")


async def test_blue_green_switches_and_abort_is_instant(
    tiered_env: FleetConfig, temporal_client: Client
) -> None:
    cfg = tiered_env
    before = stable_container(cfg, "us-west-1").image
    req = upgrade_req(cfg, "vllm/vllm-openai:v0.9.0", strategy=Strategy.BLUE_GREEN, regions=["us-west-1"])
    req = req.model_copy(update={"scale_down_delay_s": 120.0})
    handle = await start_upgrade(temporal_client, cfg, req)
    for _ in range(600):  # the switch: green carries everything while blue (stable) is kept
        if track_weights(cfg, "us-west-1")["green"] == 100:
            break
        await asyncio.sleep(0.1)
    assert track_weights(cfg, "us-west-1") == {"stable": 0, "canary": 0, "blue": 0, "green": 100}
    assert deployments(cfg, "us-west-1")["llm-stable"].status.ready_replicas == 2
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await handle.execute_update("abort", {"reason": "test rollback", "by": "pytest"})
    for _ in range(100):
        if track_weights(cfg, "us-west-1")["stable"] == 100:
            break
        await asyncio.sleep(0.02)
    assert track_weights(cfg, "us-west-1")["stable"] == 100
    assert loop.time() - t0 < 3.0  # blue was never scaled down: rollback is one weight flip
    res = await asyncio.wait_for(result_of(handle, UpgradeResult), timeout=60)
    assert res.outcome is Outcome.ABORTED and "test rollback" in res.reason
    assert stable_container(cfg, "us-west-1").image == before
    assert "llm-green" not in deployments(cfg, "us-west-1")


async def test_later_region_rolls_back_earlier_wave_stays_upgraded(
    tiered_env: FleetConfig, temporal_client: Client
) -> None:
    cfg = tiered_env
    before = stable_container(cfg, "us-east-1").image
    image = f"vllm/vllm-openai:v0.10.{uuid.uuid4().int % 1000}"
    # Only us-east-1's canary misbehaves (the fault is re-applied to replicas started later).
    admin = (cfg.region("us-east-1").devstack_admin_url or "").rstrip("/")
    async with httpx.AsyncClient(timeout=10) as http:
        (
            await http.post(f"{admin}/faults/inference", json={"track": "canary", "error_rate": 0.6})
        ).raise_for_status()
    res = await run_upgrade(temporal_client, cfg, upgrade_req(cfg, image, steps_percent=[50, 100]))
    assert res.outcome is Outcome.ROLLED_BACK and res.failed_region == "us-east-1", res
    assert [(r.region, r.image, r.state) for r in res.releases] == [
        ("us-west-1", image, "upgraded"),
        ("us-east-1", before, "rolled-back"),
    ]
    assert f"us-west-1 already promoted, still on {image} (mixed fleet)" in res.reason
    assert stable_container(cfg, "us-west-1").image == image
    assert stable_container(cfg, "us-east-1").image == before


async def test_a_tracked_httproute_is_recorded_and_an_untracked_stable_is_not(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None, request: pytest.FixtureRequest
) -> None:
    """The regional tier is the Gateway API here: the upgrade writes the dev stack's HTTPRoute `llm`
    (Argo CD's), and stable (not Argo CD's) is re-imaged. Only the route is in the result."""
    stack = contextlib.ExitStack()
    request.addfinalizer(stack.close)
    cfg = stack.enter_context(through_routes(fresh_queues(fleet_config)))
    r = cfg.region("us-west-1")
    custom = CustomObjectsApi(api_client_for(r.kube))
    where = ("gateway.networking.k8s.io", "v1", r.kube.namespace, "httproutes", "llm")
    marker = f"llm-us-west-1:gateway.networking.k8s.io/HTTPRoute:{r.kube.namespace}/llm"

    def annotate(value: str | None) -> None:
        body = {"metadata": {"annotations": {TRACKING_ANNOTATION: value}}}
        custom.patch_namespaced_custom_object(*where, body, _content_type=MERGE)

    annotate(marker)
    request.addfinalizer(lambda: annotate(None))
    req = upgrade_req(cfg, f"vllm/vllm-openai:v0.7.{uuid.uuid4().int % 1000}", steps_percent=[100])
    req = req.model_copy(update={"regions": ["us-west-1"]})
    async with running_worker(temporal_client, cfg):
        res = await run_upgrade(temporal_client, cfg, req)
    assert res.outcome is Outcome.SUCCEEDED, res.reason
    assert res.gitops_managed, "the tracked HTTPRoute's weights were written: the result must say so"
    assert {(g.region, g.kind, g.name, g.tracking) for g in res.gitops_managed} == {
        ("us-west-1", "HTTPRoute", "llm", f"{TRACKING_ANNOTATION}={marker}")
    }
    fields = [g.field for g in res.gitops_managed]
    assert "spec.rules[].backendRefs[].weight" in fields and len(fields) == len(set(fields))
    assert set(fields) <= set(OWNED["HTTPRoute"])
    route = custom.get_namespaced_custom_object(*where)
    weights = {ref["name"]: ref.get("weight", 1) for ref in route["spec"]["rules"][0]["backendRefs"]}
    # The canary's reference went with it (before its Service did), and the controller accepted that.
    assert weights == {"llm-stable": 100}
    assert accepted_at(route), route.get("status")
