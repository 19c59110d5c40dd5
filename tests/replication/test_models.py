"""Pure logic: lag arithmetic, the RPO verdict, release comparison and the model a container serves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from drctl.models.release import Release, compare
from drctl.models.rpo import RpoCheck, SourceObject, compute_lag
from drctl.providers.rclone import parse_stats
from drctl.providers.release import model_of
from tests.support.builders import lag_report, replication_run

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def obj(path: str, age_s: float) -> SourceObject:
    return SourceObject(path=path, size=1, mod_time=NOW - timedelta(seconds=age_s))


def test_lag_is_the_age_of_the_oldest_unreplicated_object() -> None:
    objects = [obj("a", 100), obj("b", 40), obj("c", 7)]
    assert compute_lag(objects, set(), set(), NOW) == (0.0, None)
    assert compute_lag(objects, {"c"}, set(), NOW) == (7.0, "c")
    assert compute_lag(objects, {"c"}, {"b"}, NOW) == (40.0, "b")
    # A path the listing did not see (written after it) cannot set the lag.
    assert compute_lag(objects, {"new"}, set(), NOW) == (0.0, None)


def test_rpo_verdict_and_its_words() -> None:
    rep = lag_report(NOW, 12.5, "models", missing=1, oldest_unreplicated="adapters/x")
    check = RpoCheck(target="e", rpo_target_s=5, reports=[rep], lag_s=12.5, objects_behind=1)
    assert check.exceeded
    assert (
        check.describe()
        == "replication lag of e is 12.5 s > RPO 5 s, 1 object(s) not replicated (models: adapters/x)"
    )
    assert not RpoCheck(target="e", rpo_target_s=5, reports=[rep], lag_s=5.0).exceeded
    unknown = RpoCheck(target="e", rpo_target_s=5, errors=["models/e: NotFound"])
    assert unknown.exceeded and "unknown" in unknown.describe()


def test_release_comparison_names_each_drift() -> None:
    src = Release(region="w", image="vllm:1", model="m", env_names=["A", "B"], served_models=["m"])
    same = compare(src, src.model_copy(update={"region": "e"}))
    assert same.drift == [] and same.errors == [] and not same.model_differs
    tgt = Release(region="e", image="vllm:0", model="m", env_names=["A", "C"], served_models=["m"])
    rep = compare(src, tgt)
    assert not rep.model_differs
    assert rep.drift == ["image vllm:0 in e, vllm:1 in w", "env missing in e: B", "env only in e: C"]
    other = compare(src, tgt.model_copy(update={"model": "n", "served_models": ["n"]}))
    assert other.model_differs and "/v1/models of e lacks m" in other.drift
    unreadable = compare(src, Release(region="e", error="cluster unreachable"))
    assert unreadable.errors == ["e: cluster unreachable"]


def test_model_of_reads_vllm_args_then_env() -> None:
    c = k8s.V1Container(name="s", args=["--model", "meta/llama", "--port", "8000"])
    assert model_of(c) == "meta/llama"
    assert (
        model_of(k8s.V1Container(name="s", command=["vllm", "serve", "qwen"], args=["--served-model-name=q"]))
        == "qwen"
    )
    assert (
        model_of(k8s.V1Container(name="s", env=[k8s.V1EnvVar(name="FLEETSIM_MODEL", value="tiny")])) == "tiny"
    )
    assert model_of(k8s.V1Container(name="s")) is None


def test_parse_stats_reads_rclone_json_log_lines() -> None:
    line = (
        '{"level":"notice","msg":"x","stats":{"bytes":1234,"checks":3,"deletes":1,"elapsedTime":0.51,'
        '"errors":0,"transfers":2}}'
    )
    st = parse_stats(line)
    assert st is not None and (st.transfers, st.bytes, st.checks, st.deletes, st.elapsed_s) == (
        2,
        1234,
        3,
        1,
        0.51,
    )
    assert parse_stats('{"level":"info","msg":"copied"}') is None and parse_stats("not json") is None


def test_lag_at_the_fault_discounts_the_time_since() -> None:
    reps = [
        lag_report(NOW, 5.5, "s", missing=1),
        lag_report(NOW, 0.0, "m"),
    ]
    check = RpoCheck(target="e", rpo_target_s=5, reports=reps, lag_s=5.5, objects_behind=1)
    assert check.lag_at(NOW - timedelta(seconds=5)) == 0.5
    assert check.lag_at(NOW - timedelta(seconds=9)) == 0.0
    assert check.lag_at(None) == 5.5


def test_an_unreadable_source_is_bounded_by_the_last_replication_check() -> None:
    from drctl.models.rpo import ReplicaPair, estimate_from_last_run

    pair = ReplicaPair(
        bucket="state", source_region="w", source_bucket="a-w", replica_region="e", replica_bucket="a-e"
    )
    checked = NOW - timedelta(seconds=4)
    last = replication_run(checked, lag_report(checked, 1.5, "state", missing=2), "state")
    rep = estimate_from_last_run(pair, last, NOW, "connection refused")
    assert (rep.lag_s, rep.missing, rep.error, rep.estimated_from) == (5.5, 2, None, checked)
    check = RpoCheck(target="e", rpo_target_s=5, reports=[rep], lag_s=rep.lag_s, objects_behind=2)
    # At a fault 1 s after that check: 1.5 s of lag then, plus 1 s of writes since, may be lost.
    assert check.lag_at(checked + timedelta(seconds=1)) == 2.5
    assert "estimated from the last replication run" in check.describe()


def test_a_model_known_on_one_side_only_is_drift_not_a_different_model() -> None:
    # A standby whose Deployment names no model (it comes from a config file, say) must not block a
    # failover when both regions list the same model in /v1/models.
    src = Release(region="w", image="vllm:1", model="m", served_models=["m"])
    unnamed = compare(src, Release(region="e", image="vllm:1", model=None, served_models=["m"]))
    assert not unnamed.model_differs and unnamed.drift == ["model None in e, m in w"]
    serving_other = compare(src, Release(region="e", image="vllm:1", model=None, served_models=["n"]))
    assert serving_other.model_differs
