"""Edges the rule-by-rule tests left open, found by `make mutate`: weights of exactly 0 or 1,
regions missing from a weight map, rounding to the millisecond, and the order within a journal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from drctl.chaos.journal import judge
from drctl.config.schema import load_config
from drctl.models import analysis as a
from drctl.models.drill import (
    ExperimentOutcome,
    JournalVerdict,
    LoadSample,
    load_figures,
    mark_stopped,
)
from drctl.models.failover import failback_plan
from drctl.models.failover_plan import _share, needed_replicas, plan_failover, serving_replicas, shift_weights
from drctl.models.fleet_spec import FleetSpec
from drctl.models.monitor_config import spec_changes
from drctl.models.release import Release, compare
from drctl.models.rpo import (
    LagReport,
    ReplicaPair,
    ReplicationRun,
    RpoCheck,
    SourceObject,
    compute_lag,
    estimate_from_last_run,
)
from tests.support.builders import drill_report, lag_report, replication_run
from tests.support.config import cap, fleet_config_data, spec

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def test_weights_of_one_and_regions_missing_from_a_map() -> None:
    # Only a third region serves: the target is left at 0, not given a weight of its own.
    assert shift_weights({"c": 1, "w": 0, "e": 0}, "w", "e") == {"c": 1, "w": 0, "e": 0}
    s = spec([("w", 60, 3), ("e", 40, 2)])
    # A target missing from the current weights carries nothing yet.
    assert needed_replicas(s, {"w": 60}, {"w": 0, "e": 60}, "e", 4)[0] == 5
    # A target at weight 1 keeps its replicas; a source that loses 1 of its 60 still moves some.
    assert needed_replicas(s, {"w": 99, "e": 1}, {"w": 99, "e": 1}, "e", 2)[0] == 2
    assert needed_replicas(s, {"w": 60, "e": 40}, {"w": 59, "e": 41}, "e", 2) == (
        3,
        "2 serving in e + 0.05 from w, for 41% of traffic",
    )
    # A source missing from `after` lost all of its weight.
    assert needed_replicas(s, {"w": 60, "e": 40}, {"e": 100}, "e", 2)[0] == 5
    one = plan_failover(s, {"w": 1, "e": 99}, "e", None, cap("e", 2), emergency=False, force=False)
    assert one.source == "w" and one.weights_after == {"w": 0, "e": 100}


def test_failback_keeps_a_step_of_one_and_steps_after_an_empty_one() -> None:
    assert failback_plan({"w": 0, "e": 0}, {"w": 2, "e": 0}, 2) == [{"w": 1, "e": 0}, {"w": 2, "e": 0}]
    assert failback_plan({"w": 0, "e": 0}, {"w": 2, "e": 0}, 4) == [{"w": 1, "e": 0}, {"w": 2, "e": 0}]


def test_a_baseline_between_one_and_two_ms_is_not_floored_further() -> None:
    limits = a.AnalysisLimits(
        max_error_rate=0.05, max_ttft_p50_ratio=1.5, max_ttft_p99_ratio=2.0, min_samples=1
    )
    cand = a.TrackSample(track="c", requests=5, ttft_p50_ms=1.6, ttft_p99_ms=1.6)
    base = a.TrackSample(track="b", requests=5, ttft_p50_ms=1.0, ttft_p99_ms=1.0)
    assert a.judge(cand, base, limits).failed_metric == "ttft_p50"


def test_models_that_differ_by_name_refuse_even_without_v1_models() -> None:
    rep = compare(Release(region="w", image="i", model="m1"), Release(region="e", image="i", model="m2"))
    assert rep.model_differs is True
    two = compare(Release(region="w", image="i"), Release(region="e", image="i", env_names=["B", "A"]))
    assert two.drift == ["env only in e: A, B"]


def test_region_changes_list_every_name() -> None:
    old = spec([("a", 50, 1), ("b", 50, 1)])
    new = spec([("c", 50, 1), ("d", 50, 1)])
    assert spec_changes(old, new) == ["regions added: c, d", "regions removed: a, b"]


def _run(lag: LagReport) -> ReplicationRun:
    return replication_run(T0, lag)


PAIR = ReplicaPair(bucket="m", source_region="w", source_bucket="sb", replica_region="e", replica_bucket="rb")


def test_an_estimate_carries_the_last_check_forward() -> None:
    last = lag_report(T0, 2.0, missing=1, differ=2, source_objects=5, oldest_unreplicated="x")
    est = estimate_from_last_run(PAIR, _run(last), T0 + timedelta(seconds=3.5), "source unreachable")
    assert est.model_dump() == {
        "bucket": "m",
        "source_region": "w",
        "replica_region": "e",
        "measured_at": T0 + timedelta(seconds=3.5),
        "lag_s": 5.5,
        "missing": 1,
        "differ": 2,
        "source_objects": 5,
        "oldest_unreplicated": "x",
        "error": None,
        "estimated_from": T0,
    }
    # A clock behind the last check adds nothing; the sum is rounded to the millisecond.
    assert estimate_from_last_run(PAIR, _run(last), T0 - timedelta(seconds=5), "x").lag_s == 2.0
    assert estimate_from_last_run(PAIR, _run(last), T0 + timedelta(microseconds=400), "x").lag_s == 2.0
    unknown = last.model_copy(update={"lag_s": None})
    est = estimate_from_last_run(PAIR, _run(unknown), T0 + timedelta(seconds=3), "source unreachable")
    assert est.lag_s == 3.0 and est.error == "source unreachable"


def test_lag_rounds_to_the_millisecond() -> None:
    objs = [SourceObject(path="a", size=1, mod_time=T0)]
    assert compute_lag(objs, {"a"}, set(), T0 + timedelta(seconds=1.2344)) == (1.234, "a")


def _lag(lag: float | None, at: datetime, oldest: str | None = None) -> LagReport:
    return lag_report(at, lag, oldest_unreplicated=oldest)


def test_lag_at_the_fault_edges() -> None:
    unmeasured = RpoCheck(
        target="e", rpo_target_s=5, lag_s=0.3, reports=[_lag(None, T0 + timedelta(seconds=0.5))]
    )
    assert unmeasured.lag_at(T0) == 0.0
    at_fault = RpoCheck(target="e", rpo_target_s=5, lag_s=1.23456, reports=[_lag(1.23456, T0)])
    assert at_fault.lag_at(T0) == 1.235
    worst = RpoCheck(
        target="e",
        rpo_target_s=0.1,
        lag_s=0.5,
        objects_behind=2,
        reports=[_lag(None, T0, "a"), _lag(0.5, T0, "b")],
    )
    assert worst.describe().endswith("(m: b)")


def _entry(name: str, kind: str, status: str | None = "succeeded", **more: object) -> dict[str, object]:
    return {"activity": {"name": name, "type": kind}, "status": status, **more}


def _journal(
    method: list[dict[str, str]], run: list[dict[str, object]], rollbacks: int = 1
) -> dict[str, object]:
    return {
        "status": "completed",
        "experiment": {"method": method, "rollbacks": [{"name": "r"}] * rollbacks},
        "steady_states": {},
        "run": run,
        "rollbacks": [_entry("r", "action")] * rollbacks,
    }


def test_journal_order_and_counts() -> None:
    kill = {"type": "action", "name": "kill"}
    look = {"type": "probe", "name": "look"}
    # Only an action planned, and it hurt nothing: said so.
    assert judge(_journal([kill], [_entry("kill", "action", output={"injected": False})])).reasons == [
        "no fault action ran: nothing was injected"
    ]
    # Only probes planned: no fault was expected, so none is missing.
    assert judge(_journal([look], [_entry("look", "probe")])).reasons == []
    # A success does not end the reading: a later failure still counts.
    v = judge(
        _journal([kill, look], [_entry("kill", "action", output={}), _entry("look", "probe", "failed")])
    )
    assert v.failed_probes == ["look"] and v.fault_injected
    v = judge(_journal([kill], [_entry("kill", "action", None)]))
    assert v.reasons == ["action 'kill' did not finish: returned None"]
    assert judge(_journal([kill], [_entry("kill", "action")], rollbacks=2)).rollbacks_ok == 2


def test_shares_and_serving_replicas_at_weight_one() -> None:
    assert _share({"a": 1}, "a") == 1.0
    s = spec([("w", 1, 2), ("e", 99, 2), ("s", 0, 3)])
    assert serving_replicas(s, "w", {"w": 1, "e": 99}) == 2.0
    # A standby is measured by every region that has weight, even a weight of 1.
    assert serving_replicas(s, "s", {"s": 50, "e": 50}) == 2.0


def test_load_figures_count_unattributed_answers_and_the_fault_instant() -> None:
    samples = [
        LoadSample(t=T0, ok=False),
        LoadSample(t=T0 + timedelta(seconds=1), ok=False),
        LoadSample(t=T0 + timedelta(seconds=2), ok=True),
        LoadSample(t=T0 + timedelta(seconds=3), ok=True),
    ]
    f = load_figures(samples, T0, None)
    assert f.served_by == {"?": 2} and f.error_window_s == 1.0


def test_an_aborted_report_measures_errors_from_the_fault_and_names_every_failed_rollback() -> None:
    v = JournalVerdict(
        fault_injected=True,
        fault_at=T0 + timedelta(seconds=1.5),
        rollbacks_expected=2,
        rollbacks_failed=["a", "b"],
    )
    load = [
        LoadSample(t=T0 + timedelta(seconds=1), ok=False),
        LoadSample(t=T0 + timedelta(seconds=2), ok=False),
        LoadSample(t=T0 + timedelta(seconds=2.5), ok=False),
    ]
    out = ExperimentOutcome(
        exit_code=1, verdict=v, journal={"status": "interrupted"}, load=load, started_at=T0, ended_at=T0
    )
    r = drill_report(T0, id="d")
    mark_stopped(r, out, "abort")
    assert r.error_window_s == 0.5 and r.errors == 3
    assert r.reasons[1] == "rollbacks incomplete (0/2 succeeded; a, b): check the region"


def test_a_route53_fleet_carries_its_ttl_propagation_bound_and_webhooks(tmp_path: Path) -> None:
    data = fleet_config_data()
    data["traffic"]["global"] = {
        "kind": "route53",
        "hosted_zone_id": "Z1",
        "record_name": "api.example.com.",
        "ttl_s": 15,
        "propagation_timeout_s": 90,
        "targets": {"us-west-1": "w.example.com", "us-east-1": "e.example.com"},
    }
    data["notifications"] = {
        "webhooks": [{"name": "ops", "url": "http://127.0.0.1:9/hook", "events": ["drill.verdict"]}]
    }
    path = tmp_path / "r53.yaml"
    path.write_text(yaml.safe_dump(data))
    s = FleetSpec.from_config(load_config(path))
    assert (s.global_ttl_s, s.global_propagation_timeout_s) == (15.0, 90.0)
    # Webhooks travel without their URL.
    assert [w.model_dump() for w in s.webhooks] == [
        {"name": "ops", "format": "json", "events": ["drill.verdict"], "timeout_s": 5.0, "retry_for_s": 120.0}
    ]
