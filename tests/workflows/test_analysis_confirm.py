"""Control.analyse on the real Temporal server: a latency FAIL is measured again before it rolls
back; an error-rate FAIL rolls back at once. The verdicts come from a scripted `analyze_tracks`
activity registered under the real name, so the workflow code under test is the product's."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from drctl.models.analysis import (
    AnalysisLimits,
    AnalysisRequest,
    AnalysisResult,
    TrackRef,
    TrackSample,
    Verdict,
)
from workflows.progressive import Progressive, Stop

pytestmark = [pytest.mark.devstack]


class Outcome(BaseModel):
    verdict: str
    reason: str
    metric: str | None = None
    analyses: int


@workflow.defn(name="AnalyseOnce", sandboxed=False)
class AnalyseOnce(Progressive):
    OPERATION, TITLE = "analyse", "One analysed step"

    @workflow.run
    async def run(self, queue: str) -> Outcome:
        history: list[AnalysisResult] = []
        req = AnalysisRequest(
            candidate=TrackRef(region="w", track="canary"),
            baseline=TrackRef(region="w", track="stable"),
            window_s=1,
            limits=AnalysisLimits(
                max_error_rate=0.05, max_ttft_p50_ratio=1.5, max_ttft_p99_ratio=2.0, min_samples=8
            ),
        )
        try:
            result = await self.ctl.analyse(req, queue, 3, history)
        except Stop as stop:
            return Outcome(
                verdict=stop.outcome.value, reason=stop.reason, metric=stop.metric, analyses=len(history)
            )
        assert result is not None
        return Outcome(verdict=result.verdict.value, reason=result.reason, analyses=len(history))


def _result(verdict: Verdict, metric: str | None = None) -> AnalysisResult:
    sample = TrackSample(track="w/canary", requests=8, ttft_p50_ms=30, ttft_p99_ms=30)
    return AnalysisResult(
        verdict=verdict,
        reason=f"{verdict.value} {metric or ''}".strip(),
        failed_metric=metric,
        candidate=sample,
        baseline=sample.model_copy(update={"track": "w/stable"}),
    )


class Script:
    def __init__(self, verdicts: Sequence[AnalysisResult]) -> None:
        self.verdicts = list(verdicts)

    @activity.defn(name="analyze_tracks")
    async def analyze_tracks(self, req: AnalysisRequest) -> AnalysisResult:
        return self.verdicts.pop(0)


async def _run(temporal_client: Client, verdicts: Sequence[AnalysisResult]) -> Outcome:
    queue = f"analyse-{uuid.uuid4().hex[:8]}"
    client = Client(
        temporal_client.service_client,
        namespace=temporal_client.namespace,
        data_converter=pydantic_data_converter,
    )
    script = Script(verdicts)
    async with Worker(client, task_queue=queue, workflows=[AnalyseOnce], activities=[script.analyze_tracks]):
        out = await client.execute_workflow(AnalyseOnce.run, queue, id=f"analyse/{queue}", task_queue=queue)
    assert not script.verdicts, f"analyses left unasked: {script.verdicts}"
    return out


async def test_one_slow_window_is_measured_again_and_passes(temporal_client: Client) -> None:
    out = await _run(temporal_client, [_result(Verdict.FAIL, "ttft_p99"), _result(Verdict.PASS)])
    assert (out.verdict, out.analyses) == ("PASS", 2)


async def test_two_slow_windows_roll_back_naming_both(temporal_client: Client) -> None:
    out = await _run(
        temporal_client,
        [_result(Verdict.FAIL, "ttft_p99"), _result(Verdict.INCONCLUSIVE), _result(Verdict.FAIL, "ttft_p50")],
    )
    assert (out.verdict, out.metric, out.analyses) == ("ROLLED_BACK", "ttft_p50", 3)
    assert out.reason == "analysis failed: FAIL ttft_p50 (and the window before: FAIL ttft_p99)"


async def test_errors_roll_back_at_once(temporal_client: Client) -> None:
    out = await _run(temporal_client, [_result(Verdict.FAIL, "error_rate")])
    assert (out.verdict, out.metric, out.analyses) == ("ROLLED_BACK", "error_rate", 1)
    # A latency FAIL already confirmed once does not earn an error a second chance either.
    out = await _run(
        temporal_client, [_result(Verdict.FAIL, "ttft_p99"), _result(Verdict.FAIL, "error_rate")]
    )
    assert (out.verdict, out.metric, out.analyses) == ("ROLLED_BACK", "error_rate", 2)
