"""The time budget that keeps a drill's rollbacks inside its deadline (drctl/chaos/budget.py and
activity_checks.py): each activity's worst case, and the refusal at each edge, naming the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from drctl.chaos import activity_checks as ac
from drctl.chaos import budget as bu
from drctl.config.schema import FleetConfig
from tests.support.config import shipped_experiment, tuned


def test_the_constants_leave_the_rollbacks_room() -> None:
    assert bu.ROLLBACK_GRACE_S == 60.0 and bu.ROLLBACK_MARGIN_S == 10.0
    assert bu.ACTION_WORST_S == 20.0 and bu.MONITOR_QUERY_S == 15.0


def test_each_provider_has_its_worst_case() -> None:
    w = "method[1]"
    args = f"{w}.provider.arguments"
    assert bu.provider_s(w, None, {"timeout": 3, "max_retries": 2}) == bu.Cost(9.0, f"{args}.timeout")
    assert bu.provider_s(w, None, {}) == bu.Cost(5.0, f"{args}.timeout")
    assert bu.provider_s(w, "http_request", {"timeout": 4}) == bu.Cost(4.0, f"{args}.timeout")
    for func in ("global_success_ratio", "traffic_share"):
        assert bu.provider_s(w, func, {"requests": 7, "timeout_s": 3}) == bu.Cost(21.0, f"{args}.requests")
    for func in ("wait_for_traffic_moved", "wait_for_served"):
        assert bu.provider_s(w, func, {"within_s": 30, "timeout_s": 2}) == bu.Cost(32.0, f"{args}.within_s")
    for func in ("monitor_status", "region_state"):
        assert bu.provider_s(w, func, {}) == bu.Cost(15.0, f"{w}.provider")
    for func in ("kill_region_replicas", "clear_faults", "kill_gateway"):
        assert bu.provider_s(w, func, {"region": "r"}) == bu.Cost(20.0, f"{w}.provider")


def test_pauses_count_and_the_largest_part_names_the_sum() -> None:
    act = {"pauses": {"before": 3, "after": 4.5, "junk": True, "nan": float("nan")}}
    assert bu.pauses_s("r[0]", act) == [bu.Cost(4.5, "r[0].pauses.after"), bu.Cost(3.0, "r[0].pauses.before")]
    assert bu.pauses_s("r[0]", {}) == [] and bu.pauses_s("r[0]", {"pauses": 5}) == []
    total = bu.activity_s([bu.Cost(3, "a"), bu.Cost(20, "b"), bu.Cost(4, "c")])
    assert total == bu.Cost(27, "b")
    assert bu.activity_s([]) == bu.Cost(0.0, "")


def _over(sections: dict[str, list[bu.Cost]], timeout_s: float = 300) -> str:
    with pytest.raises(bu.OverBudget) as info:
        bu.check_budget(sections, timeout_s)
    return str(info.value)


def test_the_rollbacks_fit_the_grace_with_the_margin() -> None:
    bu.check_budget({"rollbacks": [bu.Cost(30, "r0"), bu.Cost(20, "r1")]}, 300)  # 50 s: exactly the room
    assert _over({"rollbacks": [bu.Cost(30.5, "r0"), bu.Cost(20, "r1")]}) == (
        "r0: the rollbacks may take 50.5s, more than the 50s they are sure to get (60s after the drill's "
        "deadline, less a 10s margin)"
    )


def test_the_whole_run_fits_the_deadline_with_the_margin() -> None:
    fits = {
        "steady-state-hypothesis": [bu.Cost(50, "h0")],
        "method": [bu.Cost(100, "m0"), bu.Cost(70, "m1")],
        "rollbacks": [bu.Cost(20, "r0")],
    }
    bu.check_budget(fits, 300)  # 2 x 50 + 170 + 20 = 290 = 300 - 10
    over = copy.deepcopy(fits)
    over["method"][1] = bu.Cost(70.5, "m1")
    assert _over(over) == (
        "m0: the experiment may take 290.5s (the steady-state hypothesis twice, the method and the "
        "rollbacks), more than the 290s that leaves its rollbacks inside the drill's deadline "
        "(drills.timeout_s 300s, less a 10s margin)"
    )
    # The hypothesis counts twice: it runs before and after the method.
    assert _over({"steady-state-hypothesis": [bu.Cost(15, "h0")]}, 39).startswith(
        "h0: the experiment may take 30s"
    )
    bu.check_budget({"steady-state-hypothesis": [bu.Cost(15, "h0")]}, 40)
    bu.check_budget({}, 10)


def test_check_calls_reads_every_section_with_its_field_paths(cfg: FleetConfig) -> None:
    exp = shipped_experiment("region-outage")
    conf = {"target_region": "us-west-1", "rto_target_s": 30}
    ac.check_calls(exp, conf, cfg)
    assert [w for _, w, _ in ac.sections(exp)] == [
        "steady-state-hypothesis.probes[0]",
        "method[0]",
        "method[1]",
        "rollbacks[0]",
    ]
    assert ac.sections({"steady-state-hypothesis": "x", "method": [1, {"a": 1}], "rollbacks": None}) == [
        ("method", "method[1]", {"a": 1})
    ]
    slow = copy.deepcopy(exp)
    slow["rollbacks"][0]["pauses"] = {"before": 31}
    with pytest.raises(ac.CallRefused) as info:
        ac.check_calls(slow, conf, cfg)
    assert str(info.value) == (
        "rollbacks[0].pauses.before: the rollbacks may take 51s, more than the 50s they are sure to get "
        "(60s after the drill's deadline, less a 10s margin)"
    )
    typed = copy.deepcopy(exp)
    typed["method"][1]["provider"]["arguments"]["consecutive"] = "10"
    with pytest.raises(ac.CallRefused) as info:
        ac.check_calls(typed, conf, cfg)
    assert str(info.value) == "method[1].provider.arguments.consecutive: must be an integer, not str '10'"
    # within_s comes from ${rto_target_s}: substituted before it is checked and timed.
    with pytest.raises(ac.CallRefused) as info:
        ac.check_calls(exp, {**conf, "rto_target_s": 301}, cfg)
    assert str(info.value) == "method[1].provider.arguments.within_s: 301 is outside (0, 300]"
    short = tuned(cfg, "drills", timeout_s=150)
    with pytest.raises(ac.CallRefused) as info:
        ac.check_calls(exp, conf, short)
    assert str(info.value).startswith("steady-state-hypothesis.probes[0].provider.arguments.requests: ")
    assert "the experiment may take 172s" in str(info.value) and "less a 10s margin" in str(info.value)


def test_an_http_provider_is_timed_by_its_timeout_and_its_headers_checked(cfg: FleetConfig) -> None:
    url = cfg.traffic.global_endpoint
    http: dict[str, Any] = {"type": "http", "url": url, "timeout": 45, "max_retries": 0}
    exp = shipped_experiment("region-outage")
    exp["rollbacks"].append({"type": "probe", "name": "h", "provider": http})
    conf = {"target_region": "us-west-1", "rto_target_s": 30}
    with pytest.raises(ac.CallRefused) as info:
        ac.check_calls(exp, conf, cfg)
    assert str(info.value).startswith("rollbacks[1].provider.arguments.timeout: the rollbacks may take 65s")
    http["timeout"] = 30
    ac.check_calls(exp, conf, cfg)
    http["headers"] = {"Host": "elsewhere"}
    with pytest.raises(ac.CallRefused) as info:
        ac.check_calls(exp, conf, cfg)
    assert str(info.value).startswith("rollbacks[1].provider.headers.Host: this header may not be set")
    http["headers"] = {"X-A": "1"}
    ac.check_calls(exp, conf, cfg)
