"""The remaining pure model logic, rule by rule: step analysis, load figures of a drill, an aborted
drill's report, the RPO words, release parity, monitor spec updates and the request builders."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from drctl.config.schema import FleetConfig, load_config
from drctl.models import analysis as a
from drctl.models.activity_io import VerifyResult
from drctl.models.drill import (
    DrillReport,
    ExperimentOutcome,
    JournalVerdict,
    LoadSample,
    Verdict,
    load_figures,
    mark_stopped,
)
from drctl.models.fleet_spec import FleetSpec
from drctl.models.migration import migration_request
from drctl.models.monitor import FailoverRecord, MonitorInput, MonitorState, RegionTracker
from drctl.models.monitor_config import apply_spec, spec_changes, spec_problems
from drctl.models.release import Release, compare
from drctl.models.rpo import LagReport, RpoCheck, compute_lag, replica_pairs
from drctl.models.upgrade import Strategy, upgrade_request
from tests.support.builders import drill_report, lag_report
from tests.support.config import fleet_config_data, spec

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
LIMITS = a.AnalysisLimits(max_error_rate=0.05, max_ttft_p50_ratio=1.5, max_ttft_p99_ratio=2.0, min_samples=20)


def _s(
    track: str, requests: int, errors: int = 0, p50: float | None = 100.0, p99: float | None = 200.0
) -> a.TrackSample:
    return a.TrackSample(track=track, requests=requests, errors=errors, ttft_p50_ms=p50, ttft_p99_ms=p99)


def _judge(cand: a.TrackSample, base: a.TrackSample) -> tuple[str, str, str | None]:
    r = a.judge(cand, base, LIMITS)
    assert r.candidate == cand and r.baseline == base
    return r.verdict.value, r.reason, r.failed_metric


def test_analysis_judges_errors_first_then_samples_then_latency() -> None:
    base = _s("w/stable", 40)
    assert _judge(_s("w/canary", 40), base) == (
        "PASS",
        "w/canary error 0.0%, ttft p50 100 ms / p99 200 ms vs w/stable p50 100 / p99 200 ms",
        None,
    )
    # 2 errors out of 40 is exactly 5 %: not over the limit. 3 is.
    assert _judge(_s("w/canary", 40, 2), base)[0] == "PASS"
    assert _judge(_s("w/canary", 40, 3), base) == (
        "FAIL",
        "w/canary error rate 7.5% (3/40) > limit 5.0%",
        "error_rate",
    )
    # Few samples, but the failures alone exceed the limit at min_samples: fail now.
    assert _judge(_s("w/canary", 2, 2), base) == (
        "FAIL",
        "w/canary error rate 100.0% (2/2) > limit 5.0%",
        "error_rate",
    )
    assert _judge(_s("w/canary", 2, 1), base) == (
        "INCONCLUSIVE",
        "too few samples: w/canary 2, w/stable 40 (need 20 each)",
        None,
    )
    assert _judge(_s("w/canary", 20), _s("w/stable", 19))[0] == "INCONCLUSIVE"
    assert _judge(_s("w/canary", 20), _s("w/stable", 20))[0] == "PASS"
    assert _judge(_s("w/canary", 40, p99=None), base) == ("INCONCLUSIVE", "no ttft_p99 measured", None)
    assert _judge(_s("w/canary", 40), _s("w/stable", 40, p50=None)) == (
        "INCONCLUSIVE",
        "no ttft_p50 measured",
        None,
    )
    assert _judge(_s("w/canary", 40, p99=401.0), base) == (
        "FAIL",
        "w/canary ttft_p99 401 ms is 2.0x w/stable (200 ms) > limit 2x",
        "ttft_p99",
    )
    assert _judge(_s("w/canary", 40, p99=400.0), base)[0] == "PASS"
    assert _judge(_s("w/canary", 40, p50=151.0), base) == (
        "FAIL",
        "w/canary ttft_p50 151 ms is 1.5x w/stable (100 ms) > limit 1.5x",
        "ttft_p50",
    )
    # A near-zero baseline is floored at 1 ms, so jitter is not a huge ratio.
    assert _judge(_s("w/canary", 40, p50=1.4, p99=1.9), _s("w/stable", 40, p50=0.01, p99=0.01))[0] == "PASS"


def test_a_latency_ratio_fails_only_with_a_real_difference_behind_it() -> None:
    limits = LIMITS.model_copy(update={"min_ttft_increase_ms": 50.0, "min_samples": 8})
    base = _s("w/stable", 8, p50=30.0, p99=32.0)
    # 8 requests to 30 ms replicas: one stalled request is the p99, and 2.1x of 32 ms is 36 ms of noise.
    assert a.judge(_s("w/canary", 8, p50=31.0, p99=68.0), base, limits).verdict is a.Verdict.PASS
    slow = a.judge(_s("w/canary", 8, p50=31.0, p99=82.0), base, limits)
    assert (slow.verdict, slow.failed_metric) == (a.Verdict.FAIL, "ttft_p99")
    assert slow.reason == "w/canary ttft_p99 82 ms is 2.6x w/stable (32 ms) > limit 2x and 50 ms slower"
    assert a.judge(_s("w/canary", 8, p50=400.0, p99=410.0), base, limits).failed_metric == "ttft_p99"
    # Requests recorded before the floor existed judge the ratio alone, as they did.
    assert (
        a.AnalysisLimits.model_validate(
            LIMITS.model_dump(exclude={"min_ttft_increase_ms"})
        ).min_ttft_increase_ms
        == 0
    )
    old = limits.model_copy(update={"min_ttft_increase_ms": 0.0})
    assert a.judge(_s("w/canary", 8, p50=31.0, p99=68.0), base, old).verdict is a.Verdict.FAIL


def test_track_error_rate_and_names() -> None:
    assert _s("t", 0, 0).error_rate == 0.0 and _s("t", 4, 1).error_rate == 0.25
    assert str(a.TrackRef(region="w", track="canary")) == "w/canary"


def _cfg(tmp_path: Path) -> FleetConfig:
    data = fleet_config_data()
    data["upgrade"] = {
        "steps_percent": [10, 100],
        "step_pause_s": 3,
        "max_error_rate": 0.1,
        "max_ttft_p50_ratio": 1.2,
        "max_ttft_p99_ratio": 3.0,
        "min_samples": 7,
        "approval_between_regions": True,
        "scale_down_delay_s": 4,
    }
    data["workload"].update(max_rps_per_replica=30, peak_rps=100)
    data["regions"][1]["kube"]["namespace"] = "east-ns"
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_config(path)


def test_request_builders_take_everything_from_the_config(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    assert a.limits_from(cfg) == a.AnalysisLimits(
        max_error_rate=0.1,
        max_ttft_p50_ratio=1.2,
        max_ttft_p99_ratio=3.0,
        min_samples=7,
        min_ttft_increase_ms=50.0,
    )
    up = upgrade_request(cfg, "u1", "img:v2", env={"A": "1"})
    assert (up.upgrade_id, up.release.image, up.release.env, up.strategy) == (
        "u1",
        "img:v2",
        {"A": "1"},
        Strategy.CANARY,
    )
    assert up.regions == ["us-west-1", "us-east-1"] and up.namespaces == {
        "us-west-1": "inference",
        "us-east-1": "east-ns",
    }
    assert (
        up.app,
        up.steps_percent,
        up.step_pause_s,
        up.scale_down_delay_s,
        up.approval_between_regions,
    ) == ("llm", [10, 100], 3.0, 4.0, True)
    assert up.limits == a.limits_from(cfg) and up.spec == FleetSpec.from_config(cfg)
    bg = upgrade_request(
        cfg, "u2", "img:v3", Strategy.BLUE_GREEN, regions=["us-east-1"], steps_percent=[50, 100]
    )
    assert (
        bg.strategy == Strategy.BLUE_GREEN
        and bg.regions == ["us-east-1"]
        and bg.namespaces == {"us-east-1": "east-ns"}
    )
    assert bg.steps_percent == [50, 100] and bg.release.env == {}
    m = migration_request(cfg, "m1", "us-west-1", "us-east-1")
    assert (m.migration_id, m.source, m.target, m.namespace, m.target_namespace, m.app) == (
        "m1",
        "us-west-1",
        "us-east-1",
        "inference",
        "east-ns",
        "llm",
    )
    assert (m.steps_percent, m.step_pause_s, m.decommission_source, m.limits) == (
        [10, 100],
        3.0,
        False,
        a.limits_from(cfg),
    )
    m2 = migration_request(
        cfg,
        "m2",
        "us-east-1",
        "us-west-1",
        target_namespace="new",
        steps_percent=[100],
        decommission_source=True,
    )
    assert (m2.namespace, m2.target_namespace, m2.steps_percent, m2.decommission_source) == (
        "east-ns",
        "new",
        [100],
        True,
    )


def test_fleet_spec_from_config(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    s = FleetSpec.from_config(cfg)
    assert s.deployment == "llm-stable" and s.max_rps_per_replica == 30 and s.peak_rps == 100
    assert s.global_ttl_s == 0.0 and s.global_propagation_timeout_s == 180.0 and s.webhooks == []
    assert s.weights == {"us-west-1": 60, "us-east-1": 40} and s.region_names == ["us-west-1", "us-east-1"]
    assert s.region("us-east-1").weight == 40
    with pytest.raises(ValueError) as info:
        s.region("mars-1")
    assert str(info.value) == "unknown region 'mars-1'; known regions: us-west-1, us-east-1"


def test_fleet_spec_takes_every_field_from_the_config(tmp_path: Path) -> None:
    # Distinct values in every copied section, so a field read from the wrong place shows.
    data = fleet_config_data()
    data["health"] = {
        "interval_s": 7,
        "probe_timeout_s": 3,
        "failure_threshold": 4,
        "recovery_threshold": 5,
        "fast_confirm": False,
        "fast_confirm_interval_s": 0.7,
        "fail_on_degraded": True,
    }
    data["failover"] = {
        "policy": "manual",
        "require_approval": True,
        "approval_timeout_s": 11,
        "verify_requests": 13,
        "verify_timeout_s": 17,
        "rollout_timeout_s": 19,
    }
    data["failback"] = {"stabilization_window_s": 23, "steps": 2, "step_interval_s": 29}
    data["objectives"] = {"rto_target_s": 31, "rpo_target_s": 37}
    path = tmp_path / "distinct.yaml"
    path.write_text(yaml.safe_dump(data))
    cfg = load_config(path)
    s = FleetSpec.from_config(cfg)
    assert s.model_fields_set == set(FleetSpec.model_fields)  # none left at a default
    assert (s.interval_s, s.probe_timeout_s, s.failure_threshold, s.recovery_threshold) == (7, 3, 4, 5)
    assert (s.fast_confirm, s.fast_confirm_interval_s, s.fail_on_degraded) == (False, 0.7, True)
    assert (s.policy, s.require_approval, s.approval_timeout_s) == ("manual", True, 11)
    assert (s.verify_requests, s.verify_timeout_s, s.rollout_timeout_s) == (13, 17, 19)
    assert (s.stabilization_window_s, s.failback_steps, s.failback_step_interval_s, s.rto_target_s) == (
        23,
        2,
        29,
        31,
    )
    assert [r.model_dump() for r in s.regions] == [
        {
            "name": r.name,
            "weight": r.weight,
            "replicas": r.replicas,
            "max_replicas": r.max_replicas,
            "queue": r.queue,
        }
        for r in cfg.regions
    ]


def test_verify_counts_answers_served_by_regions() -> None:
    v = VerifyResult.model_validate({"total": 5, "ok": 5, "errors": 0, "by_region": {"a": 3, "b": 2}})
    assert v.served_by(["a", "b"]) == 5 and v.served_by(["a", "c"]) == 3 and v.served_by([]) == 0


def _sample(sec: float, ok: bool, region: str | None = "e") -> LoadSample:
    return LoadSample(t=T0 + timedelta(seconds=sec), ok=ok, region=region)


def test_load_figures_error_window_and_recovery() -> None:
    samples = [
        _sample(0, True, "w"),
        _sample(1, False),
        _sample(2, True, "w"),
        _sample(3.5, False),
        _sample(4, True, "e"),
        _sample(5, True, None),
        _sample(6, True, "e"),
    ]
    f = load_figures(samples, T0 + timedelta(seconds=0.5), "w")
    assert (f.requests, f.errors, f.served_by, f.error_window_s) == (7, 2, {"w": 2, "e": 2, "?": 1}, 2.5)
    assert f.recovered_at == T0 + timedelta(seconds=4)
    # Served by the target region after the fault is bad too, when a failover is expected.
    g = load_figures(samples + [_sample(7, True, "w")], T0, "w")
    assert g.recovered_at is None and g.error_window_s == 2.5
    # Without a target only failures count; without a fault there is no recovery.
    assert load_figures(samples, T0 + timedelta(seconds=0.5), None).recovered_at == T0 + timedelta(seconds=4)
    assert load_figures(samples, None, None).recovered_at is None
    assert load_figures(samples, None, None).error_window_s == 2.5
    # Errors before the fault are not in the window; samples are ordered by time.
    late = load_figures(list(reversed(samples)), T0 + timedelta(seconds=2), None)
    assert late.error_window_s == 0.0 and late.recovered_at == T0 + timedelta(seconds=4)
    assert load_figures([], T0, None).model_dump() == {
        "requests": 0,
        "errors": 0,
        "served_by": {},
        "error_window_s": 0.0,
        "recovered_at": None,
    }
    assert load_figures([_sample(0.0001, False), _sample(0.0017, False)], None, None).error_window_s == 0.002


def _report() -> DrillReport:
    return drill_report(T0)


def _outcome(exit_code: int | None, status: str | None, verdict: JournalVerdict) -> ExperimentOutcome:
    return ExperimentOutcome(
        exit_code=exit_code,
        verdict=verdict,
        journal_key="k",
        journal={"status": status} if status else {},
        load=[_sample(1, False), _sample(2, True, "e")],
        started_at=T0,
        ended_at=T0,
    )


def test_an_aborted_drill_says_whether_its_fault_was_undone() -> None:
    v = JournalVerdict(
        fault_injected=True, fault_at=T0, rollbacks_expected=2, rollbacks_ok=1, rollbacks_failed=["clear"]
    )
    r = _report()
    mark_stopped(r, _outcome(1, "interrupted", v), "operator abort")
    assert r.verdict is Verdict.ABORTED and r.journal == v and r.journal_key == "k"
    assert (r.fault_injected, r.fault_at, r.requests, r.errors, r.served_by, r.error_window_s) == (
        True,
        T0,
        2,
        1,
        {"e": 1},
        0.0,
    )
    assert r.reasons == [
        "aborted during the experiment: operator abort",
        "rollbacks incomplete (1/2 succeeded; clear): check the region",
    ]
    r = _report()
    mark_stopped(r, _outcome(1, "interrupted", JournalVerdict(rollbacks_expected=1)), "timeout")
    assert r.reasons[1] == "rollbacks incomplete (0/1 succeeded; not run): check the region"
    r = _report()
    mark_stopped(
        r, _outcome(1, "interrupted", JournalVerdict(rollbacks_expected=1, rollbacks_ok=1)), "timeout"
    )
    assert r.reasons[1] == "the experiment was interrupted and its 1 rollback(s) succeeded"
    r = _report()
    mark_stopped(r, _outcome(None, None, JournalVerdict()), "abort")
    assert r.reasons[1] == "stopped before `chaos run` started: nothing was injected"
    r = _report()
    mark_stopped(r, _outcome(-9, None, JournalVerdict()), "abort")
    assert (
        r.reasons[1]
        == "`chaos run` left no journal, so whether its rollbacks ran is unknown: check the region"
    )


def _lag(
    bucket: str, lag: float | None, at: datetime = T0, oldest: str | None = None, est: bool = False
) -> LagReport:
    return lag_report(at, lag, bucket, oldest_unreplicated=oldest, estimated_from=T0 if est else None)


def test_rpo_words_and_lag_at_the_fault() -> None:
    check = RpoCheck(
        target="e",
        rpo_target_s=5,
        reports=[_lag("models", 2.0), _lag("state", 9.0, oldest="s/1")],
        lag_s=9.0,
        objects_behind=3,
    )
    assert check.exceeded
    assert (
        check.describe() == "replication lag of e is 9.0 s > RPO 5 s, 3 object(s) not replicated (state: s/1)"
    )
    estimated = RpoCheck(
        target="e", rpo_target_s=5, reports=[_lag("m", 6.0, est=True)], lag_s=6.0, objects_behind=1
    )
    assert estimated.describe() == (
        "replication lag of e is 6.0 s > RPO 5 s, 1 object(s) not replicated "
        "(estimated from the last replication run: source unreachable)"
    )
    assert RpoCheck(target="e", rpo_target_s=5, lag_s=None).describe() == (
        "replication lag of e is 0.0 s > RPO 5 s, 0 object(s) not replicated"
    )
    broken = RpoCheck(target="e", rpo_target_s=5, errors=["a: refused", "b: timeout"])
    assert broken.exceeded and broken.describe() == "replication lag of e unknown: a: refused; b: timeout"
    assert not RpoCheck(target="e", rpo_target_s=5, lag_s=5.0).exceeded
    assert RpoCheck(target="e", rpo_target_s=5, lag_s=5.1).exceeded
    assert not RpoCheck(target="e", rpo_target_s=5, lag_s=None).exceeded
    # Measured 3 s after the fault: the lag then was 3 s less (never below 0).
    later = RpoCheck(
        target="e",
        rpo_target_s=5,
        lag_s=9.0,
        reports=[
            _lag("a", 9.0, T0 + timedelta(seconds=3)),
            _lag("b", 1.0, T0 + timedelta(seconds=3)),
            _lag("c", None, T0 - timedelta(seconds=3)),
        ],
    )
    assert later.lag_at(T0) == 6.0 and later.lag_at(None) == 9.0
    assert RpoCheck(target="e", rpo_target_s=5, lag_s=None).lag_at(T0) is None
    assert RpoCheck(target="e", rpo_target_s=5, lag_s=1.0).lag_at(T0) == 0.0


def test_lag_is_the_age_of_the_oldest_behind_object() -> None:
    from drctl.models.rpo import SourceObject

    objs = [
        SourceObject(path="a", size=1, mod_time=T0),
        SourceObject(path="b", size=1, mod_time=T0 + timedelta(seconds=5)),
        SourceObject(path="c", size=1, mod_time=T0 - timedelta(seconds=5)),
    ]
    now = T0 + timedelta(seconds=10)
    assert compute_lag(objs, {"a"}, {"b"}, now) == (10.0, "a")
    assert compute_lag(objs, set(), {"b"}, now) == (5.0, "b")
    assert compute_lag(objs, set(), set(), now) == (0.0, None)
    assert compute_lag(objs, {"b"}, set(), T0) == (0.0, "b")


def test_replica_pairs_list_every_bucket_replica(tmp_path: Path) -> None:
    pairs = replica_pairs(_cfg(tmp_path))
    assert [
        (p.bucket, p.source_bucket, p.replica_region, p.replica_bucket, p.mode, p.interval_s, p.key)
        for p in pairs
    ] == [
        (
            "models",
            "drctl-models-us-west-1",
            "us-east-1",
            "drctl-models-us-east-1",
            "sync",
            3.0,
            "models/us-east-1",
        ),
        (
            "state",
            "drctl-state-us-west-1",
            "us-east-1",
            "drctl-state-us-east-1",
            "copy",
            2.0,
            "state/us-east-1",
        ),
    ]


def _rel(region: str, **kw: object) -> Release:
    return Release.model_validate({"region": region, "image": "img:1", **kw})


def test_release_parity_names_each_drift() -> None:
    same = compare(
        _rel("w", model="m", env_names=["A"], served_models=["m"]),
        _rel("e", model="m", env_names=["A"], served_models=["m", "x"]),
    )
    assert (
        not same.drift
        and not same.errors
        and not same.model_differs
        and (same.source, same.target) == ("w", "e")
    )
    rep = compare(
        _rel("w", image="img:2", model="m1", env_names=["A", "B", "C"], served_models=["m1", "m2"]),
        _rel("e", model="m0", env_names=["C", "D"], served_models=["m0"], error="x"),
    )
    assert rep.model_differs and rep.drift
    assert rep.errors == ["e: x"]
    assert rep.drift == [
        "image img:1 in e, img:2 in w",
        "model m0 in e, m1 in w",
        "env missing in e: A, B",
        "env only in e: D",
        "/v1/models of e lacks m1, m2",
    ]
    # Known on one side only: drift to show, not a different model.
    one_side = compare(_rel("w", model="m"), _rel("e"))
    assert not one_side.model_differs and one_side.drift == ["model None in e, m in w"]
    assert not compare(_rel("w"), _rel("e", model="m")).model_differs
    assert compare(_rel("w", error="down"), _rel("e")).errors == ["w: down"]


def test_monitor_spec_updates(tmp_path: Path) -> None:
    old = spec([("w", 60, 2), ("e", 40, 2)])
    assert spec_problems(old, old) == []
    other = old.model_copy(update={"fleet": "prod", "task_queue": "q2", "regions": []})
    assert spec_problems(old, other) == [
        "the config is for fleet 'prod', this monitor watches 't'",
        "temporal.task_queue changed (q → q2): stop the monitor and start it again",
        "the new config has no region with weight",
    ]
    zero = spec([("w", 0, 2), ("e", 0, 2)])
    assert spec_problems(old, zero) == ["the new config has no region with weight"]
    assert spec_problems(old, spec([("w", 1, 2), ("e", 0, 2)])) == []
    new = spec([("e", 50, 3), ("c", 50, 2)]).model_copy(update={"policy": "manual"})
    assert spec_changes(old, new) == [
        "regions added: c",
        "regions removed: w",
        "e.weight: 40 → 50",
        "e.replicas: 2 → 3",
        "policy: automatic → manual",
    ]
    assert spec_changes(old, old) == []
    state = MonitorState.initial(MonitorInput(spec=old))
    state.trackers["e"] = RegionTracker(region="e", consecutive_failures=2)
    state.failed_over = [
        FailoverRecord(workflow_id="f", source="w", target="e", started_at=T0),
        FailoverRecord(workflow_id="g", source="e", target="c", started_at=T0),
    ]
    state.avoid_targets = {"w": T0, "e": T0}
    state.unresolved = {"w": "x", "c": "y"}
    assert apply_spec(state, new) == spec_changes(old, new)
    assert list(state.trackers) == ["e", "c"] and state.trackers["e"].consecutive_failures == 2
    assert state.trackers["c"].region == "c"
    assert [r.workflow_id for r in state.failed_over] == ["g"]
    assert state.avoid_targets == {"e": T0} and state.unresolved == {"c": "y"}
    assert state.policy == "manual" and state.spec == new
    # An operator's set_policy survives a re-apply of a config whose policy did not change.
    state.policy = "automatic"
    apply_spec(state, new.model_copy(update={"interval_s": 5}))
    assert state.policy == "automatic" and state.spec.interval_s == 5


def test_a_change_is_noted_as_gitops_managed_only_when_the_object_carries_a_marker() -> None:
    from drctl.models.gitops import argocd_tracking, changes, note_all

    noted: list = []
    note_all(noted, changes("us-east-1", "Deployment", "llm-stable", ["spec.replicas"], None))
    assert noted == []
    marker = argocd_tracking({"app.kubernetes.io/instance": "llm"}, None)
    note_all(noted, changes("us-east-1", "Deployment", "llm-stable", ["spec.replicas"], marker))
    assert [(g.region, g.name, g.field, g.tracking) for g in noted] == [
        ("us-east-1", "llm-stable", "spec.replicas", "app.kubernetes.io/instance=llm")
    ]
