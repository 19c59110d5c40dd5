"""Saturated, not down: a failing probe that only waited behind a full queue that still finishes
requests is the rebalance's to shed; anything else (no queue, no progress, a refused connection, a
5xx, the rebalance not automatic) keeps the failed verdict, so a down region still fails over."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drctl.models.health import ProbeStatus, RegionProbe, RegionState, TargetProbe
from drctl.models.monitor import RegionTracker
from drctl.models.saturation import finished_total, judge_probe, saturation
from drctl.models.watch import feed_probe
from tests.support.builders import watch_input

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


def _target(name: str, error_class: str | None = "slow", **kw: object) -> TargetProbe:
    status = ProbeStatus.HEALTHY if error_class is None else ProbeStatus.DEGRADED
    base: dict[str, object] = dict(
        target=name, url=f"http://127.0.0.1/{name}", status=status, error_class=error_class, latency_ms=3.0
    )
    return TargetProbe.model_validate({**base, **kw})


def _probe(
    waiting: float = 25.0,
    finished: float = 140.0,
    error_class: str | None = "slow",
    status: ProbeStatus = ProbeStatus.DEGRADED,
    **replica: object,
) -> RegionProbe:
    fields: dict[str, object] = {"queue_depth": waiting, "running": 16.0, "finished": finished, **replica}
    return RegionProbe(
        region="us-west-1",
        status=status,
        reason="slow TTFT",
        gateway=_target("gateway", error_class),
        replicas=[_target("llm-stable-0", error_class, **fields)],
    )


def test_a_full_queue_that_still_finishes_requests_is_saturated_with_its_figures() -> None:
    # The region runs 2 replicas and 1 is no longer listed (Kubernetes dropped the lost node's pod).
    why = saturation(_probe(finished=152.0), finished_before=140.0, expected_replicas=2)
    assert why is not None
    assert why.startswith("saturated, not down: 25 requests waiting and 16 running on 1 replica(s) (1 gone)")
    assert "12 finished since the last probe" in why
    # Timeouts are what a full queue causes too (no first token at all within the probe's bound).
    assert saturation(_probe(finished=141.0, error_class="timeout"), 140.0, 2) is not None


def test_a_full_queue_on_every_replica_is_slowness_not_lost_capacity() -> None:
    # A gray failure (TTFT x20) fills the slots just as load does; nothing was lost, so the probe's
    # verdict stands and a region that stays slow still fails over.
    assert saturation(_probe(finished=152.0), 140.0, expected_replicas=1) is None
    assert saturation(_probe(finished=152.0), 140.0) is None


def test_replicas_that_are_gone_are_lost_capacity_and_the_rest_can_still_be_saturated() -> None:
    # The partial failure itself: one of two replicas lost (refused), the other full and finishing.
    probe = _probe(finished=150.0)
    probe.replicas.append(
        TargetProbe(
            target="llm-stable-1",
            url="http://127.0.0.1/llm-stable-1",
            status=ProbeStatus.DOWN,
            error_class="connect",
        )
    )
    why = saturation(probe, finished_before=140.0)
    assert why is not None and "on 1 replica(s) (1 gone)" in why  # gone though still listed
    # Every replica gone: nothing serves, whatever the gateway says.
    probe.replicas = probe.replicas[1:]
    assert saturation(probe, finished_before=0.0) is None


@pytest.mark.parametrize(
    ("probe", "before", "why"),
    [
        (_probe(finished=140.0), 140.0, "no request finished since the last probe: a hung engine"),
        (_probe(finished=150.0), None, "no earlier reading: progress needs two"),
        (_probe(waiting=0.0, finished=150.0), 140.0, "nothing waiting: slow, not full (a gray failure)"),
        (_probe(finished=150.0, error_class="connect"), 140.0, "a refused connection is down"),
        (_probe(finished=150.0, error_class="http_5xx"), 140.0, "a 5xx is an error, not a queue"),
        (_probe(finished=150.0, latency_ms=None), 140.0, "/health did not answer"),
        (_probe(finished=150.0, queue_depth=None), 140.0, "no /metrics: nothing shows a queue"),
        (_probe(finished=120.0), 140.0, "the counter went back (a restarted replica): not judged"),
        (_probe(error_class=None, status=ProbeStatus.HEALTHY), 100.0, "a passing probe is not saturated"),
    ],
)
def test_anything_else_is_not_saturated(probe: RegionProbe, before: float | None, why: str) -> None:
    assert saturation(probe, before, expected_replicas=2) is None, why


def test_finished_total_sums_the_replicas_that_export_it() -> None:
    probe = _probe(finished=10.0)
    probe.replicas.append(_target("llm-stable-1", finished=5.0))
    probe.replicas.append(_target("llm-stable-2"))  # no /metrics
    assert finished_total(probe) == 15.0
    assert finished_total(_probe(finished=None)) is None  # type: ignore[arg-type]


def test_judge_counts_saturation_as_good_only_when_the_rebalance_sheds_it() -> None:
    t = RegionTracker(region="us-west-1")
    assert not judge_probe(t, _probe(finished=100.0), True, True, expected_replicas=2)  # first reading
    assert judge_probe(t, _probe(finished=110.0), True, True, expected_replicas=2) and t.saturated
    assert t.last_finished == 110.0
    off = RegionTracker(region="us-west-1", last_finished=100.0)
    assert not judge_probe(off, _probe(finished=110.0), True, False, expected_replicas=2)
    assert off.saturated is None and off.last_finished == 110.0


def test_the_watcher_keeps_a_saturated_region_serving_and_fails_a_hung_one_over() -> None:
    base: dict[str, object] = dict(regions=["us-west-1"], trackers={}, expected_replicas={"us-west-1": 2})
    shed = watch_input(**base, shed_saturation=True)
    t = RegionTracker(region="us-west-1")
    for i in range(6):  # requests keep finishing behind the queue: never a failed check after the first
        feed_probe(t, _probe(finished=100.0 + 10 * i), T0 + timedelta(seconds=i), shed)
    assert t.state is RegionState.HEALTHY and t.saturated is not None
    hung = RegionTracker(region="us-west-1")
    for i in range(3):  # the same queue, but nothing finishes: down
        feed_probe(hung, _probe(finished=100.0), T0 + timedelta(seconds=i), shed)
    assert hung.state is RegionState.UNHEALTHY and hung.saturated is None
    plain = watch_input(**base)  # rebalance off or advise: today's verdict
    off = RegionTracker(region="us-west-1")
    for i in range(3):
        feed_probe(off, _probe(finished=100.0 + 10 * i), T0 + timedelta(seconds=i), plain)
    assert off.state is RegionState.UNHEALTHY
