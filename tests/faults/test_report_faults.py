"""S3 unavailable while a drill report is written: retried with backoff, and never lost.

A loopback proxy in front of moto answers PUTs with S3's `503 SlowDown`. The drill's own upload step
(`workflows.drill.store_report`, the function ChaosDrill ends with) runs in a workflow on a real
Temporal dev server with the product's report activity.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
import pytest_asyncio
from aiohttp import web
from pydantic import BaseModel
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment

from activities import reports
from drctl.config.schema import FleetConfig, parse_config
from drctl.models.drill import DrillReport
from tests.support.builders import drill_report
from tests.support.fault_proxy import Fault, KubeFaultProxy, serve
from tests.support.moto import aws_client, port_of
from tests.support.ports import free_port
from tests.support.temporal import execute_once
from workflows.drill import store_report

SLOW_DOWN = (
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    "<Message>Please reduce your request rate.</Message><RequestId>fault</RequestId></Error>"
)


class StoreInput(BaseModel):
    report: DrillReport
    give_up_after_s: float


@workflow.defn(name="StoreReportThroughFaults", sandboxed=False)
class StoreReportThroughFaults:
    @workflow.run
    async def run(self, inp: StoreInput) -> DrillReport:
        await store_report(inp.report, timedelta(seconds=inp.give_up_after_s))
        return inp.report


class S3Stack:
    def __init__(self, moto_port: int, proxy: KubeFaultProxy, proxy_port: int) -> None:
        self.proxy = proxy
        self.s3 = aws_client("s3", f"http://127.0.0.1:{moto_port}")
        self.cfg: FleetConfig = parse_config(f"""
name: reportfaults
regions:
  - {{name: us-west-1, weight: 100, gateway_url: "http://127.0.0.1:1", kube: {{api_url: "http://127.0.0.1:1"}}}}
traffic:
  global_endpoint: http://127.0.0.1:1
  global: {{kind: haproxy, runtime_socket: /nonexistent.sock}}
  regional: {{kind: gateway-api}}
aws: {{region: us-east-1, endpoint_url: "http://127.0.0.1:{proxy_port}"}}
""")
        self.s3.create_bucket(Bucket=self.cfg.drills.history_bucket)


@pytest_asyncio.fixture(scope="module")
async def stack(moto_url: str) -> AsyncIterator[S3Stack]:
    moto_port, proxy_port = port_of(moto_url), free_port()
    proxy = KubeFaultProxy(f"http://127.0.0.1:{moto_port}")
    runner: web.AppRunner = await serve(proxy, proxy_port)
    try:
        yield S3Stack(moto_port, proxy, proxy_port)
    finally:
        await runner.cleanup()


def _report() -> DrillReport:
    return drill_report(
        id=f"drill/reportfaults/{uuid.uuid4().hex[:8]}",
        fleet="reportfaults",
        experiment="x.json",
        title="region outage",
        target_region="us-west-1",
        rto_target_s=30.0,
        measured_rto_s=12.5,
    )


async def _store(
    temporal_env: WorkflowEnvironment, stack: S3Stack, report: DrillReport, give_up_after_s: float
) -> DrillReport:
    store = StoreInput(report=report, give_up_after_s=give_up_after_s)
    activities = reports.build(stack.cfg)
    return await execute_once(
        temporal_env.client, StoreReportThroughFaults, store, activities, "reports", "store"
    )


def _json_key(report: DrillReport) -> str:
    return f"reports/reportfaults/{report.id.rsplit('/', 1)[1]}.json"


@pytest.fixture(autouse=True)
def clean_faults(stack: S3Stack) -> None:
    stack.proxy.faults.clear()


async def test_report_upload_outlasts_slow_down_with_backoff(
    temporal_env: WorkflowEnvironment, stack: S3Stack
) -> None:
    report = _report()
    fault = stack.proxy.add(Fault("PUT", rf".*/{_json_key(report)}", status=503, times=3, body=SLOW_DOWN))
    out = await _store(temporal_env, stack, report, give_up_after_s=120)
    assert out.reasons == []  # stored: nothing to report about the upload
    assert fault.hits == 4  # one try per attempt (no hidden botocore retries), the fourth went through
    gaps = [b - a for a, b in zip(fault.at, fault.at[1:], strict=False)]
    assert gaps[0] < gaps[1] < gaps[2], gaps  # the retry policy backs off
    body = stack.s3.get_object(Bucket=stack.cfg.drills.history_bucket, Key=_json_key(report))["Body"].read()
    assert DrillReport.model_validate_json(body) == report


async def test_report_kept_in_the_result_when_s3_stays_down(
    temporal_env: WorkflowEnvironment, stack: S3Stack
) -> None:
    report = _report()
    fault = stack.proxy.add(Fault("PUT", rf".*/{_json_key(report)}", status=503, body=SLOW_DOWN))
    out = await _store(temporal_env, stack, report, give_up_after_s=5)
    assert fault.hits >= 3  # retried until the window closed
    # Nothing lost: the whole report is the result, and it says the upload failed and why.
    assert out.model_dump(exclude={"reasons"}) == report.model_dump(exclude={"reasons"})
    [why] = out.reasons
    assert why.startswith("report not stored in S3 (it is in this workflow's result)")
    assert "SlowDown" in why and f"s3://{stack.cfg.drills.history_bucket}" in why
    listed = stack.s3.list_objects_v2(Bucket=stack.cfg.drills.history_bucket, Prefix=_json_key(report))
    assert listed.get("KeyCount", 0) == 0
