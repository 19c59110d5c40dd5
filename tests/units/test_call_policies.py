"""The typed activity stubs in workflows/calls.py pass each activity the bounds it had before the
stubs shared policy bundles: timeouts that scale with the input, queue waits, heartbeats, retries."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.common import RetryPolicy

from workflows import calls


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """What the stubs hand to workflow.execute_activity, instead of running anything."""
    got: list[tuple[str, dict[str, Any]]] = []

    async def execute_activity(name: str, **options: Any) -> None:
        got.append((name, options))

    monkeypatch.setattr(calls.workflow, "execute_activity", execute_activity)
    return got


def _s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


INP = SimpleNamespace(timeout_s=7.0, window_s=11.0, webhook=SimpleNamespace(timeout_s=3.0, retry_for_s=99.0))


def test_retry_policies_keep_their_values() -> None:
    assert calls.FAST_RETRY == RetryPolicy(
        initial_interval=_s(0.2), backoff_coefficient=2.0, maximum_interval=_s(2), maximum_attempts=5
    )
    assert calls.PLATFORM_RETRY == RetryPolicy(
        initial_interval=_s(1), backoff_coefficient=2.0, maximum_interval=_s(10), maximum_attempts=6
    )
    assert calls.RUN_RETRY == RetryPolicy(initial_interval=_s(2), maximum_interval=_s(10), maximum_attempts=3)
    # Unlimited attempts: schedule_to_close bounds the upload.
    assert calls.REPORT_UPLOAD_RETRY.maximum_attempts == 0


def test_region_calls_wait_for_a_worker_and_scale_with_the_input(
    sent: list[tuple[str, dict[str, Any]]],
) -> None:
    asyncio.run(calls.wait_rollout(INP, queue="q-east", summary="s"))  # type: ignore[arg-type]
    asyncio.run(calls.replicate_pair(INP, queue="q-east", timeout_s=8.0, summary="s"))  # type: ignore[arg-type]
    asyncio.run(calls.check_rpo(INP, queue="q-east", bound_s=6.0, summary="s"))  # type: ignore[arg-type]
    (rollout_name, rollout), (_, replicate), (_, rpo) = sent
    assert rollout_name == "wait_rollout" and rollout["task_queue"] == "q-east"
    # A rollout attempt may run to the Deployment's progressDeadlineSeconds plus load, whatever timeout_s.
    assert (rollout["start_to_close_timeout"], rollout["heartbeat_timeout"]) == (_s(3630), _s(10))
    assert (rollout["schedule_to_start_timeout"], rollout["retry_policy"]) == (_s(30), calls.PLATFORM_RETRY)
    # A replica region's worker may be restarting: it waits longer for one than an operation does.
    assert (replicate["schedule_to_start_timeout"], replicate["start_to_close_timeout"]) == (_s(60), _s(46))
    assert (rpo["heartbeat_timeout"], rpo["retry_policy"]) == (_s(6), calls.NO_RETRY)


def test_calls_bounded_otherwise_do_not_wait_for_a_worker(sent: list[tuple[str, dict[str, Any]]]) -> None:
    asyncio.run(calls.verify_global(INP, queue="q", deadline_s=13.0, summary="s"))  # type: ignore[arg-type]
    asyncio.run(calls.notify_webhook(INP, summary="s"))  # type: ignore[arg-type]
    asyncio.run(calls.probe_from(INP, queue="q", probe_timeout_s=2.0, vantage_timeout_s=4.0, summary="s"))  # type: ignore[arg-type]
    (_, verify), (_, hook), (vote_name, vote) = sent
    assert verify["schedule_to_start_timeout"] is None and verify["schedule_to_close_timeout"] == _s(18)
    assert (verify["start_to_close_timeout"], verify["heartbeat_timeout"]) == (_s(12), _s(5))
    assert hook["schedule_to_start_timeout"] is None and hook["schedule_to_close_timeout"] == _s(99)
    # A quorum vote waits vantage_timeout_s for a worker, once.
    assert vote_name == "probe_regions" and vote["schedule_to_start_timeout"] == _s(4)
    assert (vote["start_to_close_timeout"], vote["retry_policy"]) == (_s(13), calls.NO_RETRY)
