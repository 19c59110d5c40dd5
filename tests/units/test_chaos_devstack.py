"""drctl's chaos actions and probes over real HTTP to an in-process stand-in of the region admin API
and the global endpoint (tests/support/standin.py): what each sends, what it reports, and when it
refuses. The Kubernetes injector's path runs against the dev stack in tests/drills/test_kube_injector.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl import chaos
from drctl.chaos import actions, faults, probes
from drctl.config.schema import FleetConfig, UnknownRegionError
from tests.support.config import fleet_config_data, tuned
from tests.support.standin import Reply, StandIn, serve

WEST, EAST = "us-west-1", "us-east-1"


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    yield from serve()


@pytest.fixture(autouse=True)
def _fresh(standin: StandIn) -> None:
    standin.reset()


def _write(
    directory: Path,
    standin: StandIn,
    name: str,
    *,
    allowed: list[str] | None = None,
    injector: str = "devstack",
    auth_env: str | None = None,
    header: str | None = None,
) -> str:
    data: dict[str, Any] = fleet_config_data()
    for r in data["regions"]:
        r["devstack_admin_url"] = f"{standin.url}/admin/{r['name']}/"
    data["traffic"]["global_endpoint"] = standin.url + "/"
    if header:
        data["traffic"]["region_header"] = header
    if auth_env:
        data["workload"]["auth"] = {"token_env": auth_env}
    data["drills"] = {
        "allowed_targets": [WEST, EAST] if allowed is None else allowed,
        "fault_injector": injector,
    }
    path = directory / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.fixture(scope="module")
def conf(standin: StandIn, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = _write(tmp_path_factory.mktemp("chaos"), standin, "fleet.yaml", allowed=[WEST])
    return {"fleet_config": path, "drill_id": "drill/test/1"}


def _posts(standin: StandIn) -> list[tuple[str, Any]]:
    return [(path, body) for method, path, body, _ in standin.calls if method == "POST"]


def test_fleet_and_endpoint_come_from_the_configuration(conf: dict[str, Any], standin: StandIn) -> None:
    cfg = chaos.fleet(conf)
    assert isinstance(cfg, FleetConfig) and cfg.source_path == conf["fleet_config"]
    assert chaos.fleet(conf) is cfg  # loaded once per path
    assert chaos.global_endpoint(conf) == standin.url
    assert (
        chaos.global_endpoint({**conf, "global_endpoint": "http://127.0.0.1:1/X/"}) == "http://127.0.0.1:1/X"
    )
    for missing in (None, {}, {"fleet_config": ""}):
        with pytest.raises(ValueError) as info:
            chaos.fleet(missing)
        assert str(info.value) == "experiment configuration has no 'fleet_config' (set it or DRCTL_CONFIG)"
    with pytest.raises(chaos.TargetNotAllowed) as refused:
        chaos.ensure_allowed(cfg, EAST)
    assert (
        str(refused.value)
        == "region 'us-east-1' is not an allowed drill target (drills.allowed_targets: us-west-1)"
    )
    chaos.ensure_allowed(cfg, WEST)
    two = tuned(cfg, "drills", allowed_targets=[WEST, "eu-west-9"])
    with pytest.raises(chaos.TargetNotAllowed, match=r"\(drills.allowed_targets: us-west-1, eu-west-9\)$"):
        chaos.ensure_allowed(two, EAST)
    nobody = tuned(cfg, "drills", allowed_targets=[])
    with pytest.raises(chaos.TargetNotAllowed, match=r"\(drills.allowed_targets: none\)$"):
        chaos.ensure_allowed(nobody, WEST)


def test_region_outage_kills_every_replica_of_the_track_and_names_its_owner(
    conf: dict[str, Any], standin: StandIn
) -> None:
    standin.replies["POST /admin/us-west-1/faults/replicas"] = Reply(200, {"affected": ["r1", "r2"]})
    out = actions.kill_region_replicas(WEST, track="canary", configuration=conf)
    assert _posts(standin) == [
        (
            "/admin/us-west-1/faults/replicas",
            {"action": "kill", "track": "canary", "stay_down": True, "owner": "drill/test/1"},
        )
    ]
    at = out.pop("at")
    assert out == {"injected": True, "fault": "region-outage", "region": WEST, "affected": ["r1", "r2"]}
    assert at.startswith("20") and "+00:00" in at
    # Nothing matched (or nothing said): a fault that hurt nothing never reads as injected.
    standin.replies["POST /admin/us-west-1/faults/replicas"] = Reply(200, {})
    with pytest.raises(actions.FaultNotInjected):
        actions.kill_region_replicas(WEST, configuration=conf)
    standin.replies["POST /admin/us-west-1/faults/replicas"] = Reply(200, {"affected": []})
    with pytest.raises(actions.FaultNotInjected) as info:
        actions.kill_region_replicas(WEST, configuration={"fleet_config": conf["fleet_config"]})
    assert str(info.value) == "region-outage in us-west-1: nothing matched, nothing was hurt"
    assert _posts(standin)[-1][1] == {"action": "kill", "track": "stable", "stay_down": True, "owner": None}


def test_every_action_refuses_a_region_outside_the_allow_list_before_any_call(
    conf: dict[str, Any], standin: StandIn
) -> None:
    calls: list[Any] = [
        lambda: actions.kill_region_replicas(EAST, configuration=conf),
        lambda: actions.kill_replicas(EAST, configuration=conf),
        lambda: actions.degrade_region(EAST, added_latency_ms=5, configuration=conf),
        lambda: actions.kill_gateway(EAST, configuration=conf),
        lambda: actions.clear_faults(EAST, configuration=conf),
    ]
    for call in calls:
        with pytest.raises(chaos.TargetNotAllowed):
            call()
    with pytest.raises(UnknownRegionError):
        actions.kill_gateway("mars-1", configuration=conf)
    assert standin.calls == []


def test_replica_loss_kills_count_replicas(conf: dict[str, Any], standin: StandIn) -> None:
    standin.replies["POST /admin/us-west-1/faults/replicas"] = Reply(200, {"affected": ["r1"]})
    out = actions.kill_replicas(WEST, count=2, track="canary", configuration=conf)
    assert (out["fault"], out["affected"], out["injected"]) == ("replica-loss", ["r1"], True)
    assert _posts(standin) == [
        (
            "/admin/us-west-1/faults/replicas",
            {"action": "kill", "track": "canary", "count": 2, "owner": "drill/test/1"},
        )
    ]
    assert actions.kill_replicas(WEST, configuration=conf)["affected"] == ["r1"]
    assert _posts(standin)[-1][1] == {
        "action": "kill",
        "track": "stable",
        "count": 1,
        "owner": "drill/test/1",
    }
    with pytest.raises(ValueError, match="^count must be at least 1$"):
        actions.kill_replicas(WEST, count=0, configuration=conf)
    standin.replies["POST /admin/us-west-1/faults/replicas"] = Reply(200, {})
    with pytest.raises(actions.FaultNotInjected, match="^replica-loss in us-west-1: nothing matched"):
        actions.kill_replicas(WEST, configuration=conf)


def test_degradation_sends_latency_and_error_rate(conf: dict[str, Any], standin: StandIn) -> None:
    out = actions.degrade_region(
        WEST, added_latency_ms=250.0, error_rate=0.5, track="canary", configuration=conf
    )
    out.pop("at")
    assert out == {
        "injected": True,
        "fault": "region-degradation",
        "region": WEST,
        "affected": ["us-west-1/canary"],
        "track": "canary",
        "added_latency_ms": 250.0,
        "error_rate": 0.5,
    }
    assert _posts(standin) == [
        (
            "/admin/us-west-1/faults/inference",
            {"track": "canary", "added_latency_ms": 250.0, "error_rate": 0.5, "owner": "drill/test/1"},
        )
    ]
    standin.replies["POST /admin/us-west-1/faults/inference"] = Reply(200, {"affected": ["a", "b"]})
    assert actions.degrade_region(WEST, error_rate=1.0, configuration=conf)["affected"] == ["a", "b"]
    assert actions.degrade_region(WEST, added_latency_ms=1, configuration=conf)["track"] == "stable"
    for kwargs, message in [
        ({}, "give added_latency_ms > 0 or error_rate > 0"),
        ({"added_latency_ms": -1, "error_rate": 0}, "give added_latency_ms > 0 or error_rate > 0"),
        ({"error_rate": 1.5}, "error_rate must be within 0..1"),
        ({"added_latency_ms": 5, "error_rate": -0.5}, "error_rate must be within 0..1"),
    ]:
        with pytest.raises(ValueError) as info:
            actions.degrade_region(WEST, configuration=conf, **kwargs)
        assert str(info.value) == message


def test_gateway_loss_and_clearing(conf: dict[str, Any], standin: StandIn) -> None:
    out = actions.kill_gateway(WEST, configuration=conf)
    assert (out["fault"], out["region"], out["affected"]) == ("gateway-loss", WEST, ["us-west-1/gateway"])
    # An answer that is not a mapping names no replica: the region's gateway stands for it.
    standin.replies["POST /admin/us-west-1/faults/gateway"] = Reply(200, ["ok"])
    assert actions.kill_gateway(WEST, configuration=conf)["affected"] == ["us-west-1/gateway"]
    standin.replies["POST /admin/us-west-1/faults/inference"] = Reply(200, ["ok"])
    assert actions.degrade_region(WEST, error_rate=0.5, configuration=conf)["affected"] == [
        "us-west-1/stable"
    ]
    standin.replies["POST /admin/us-west-1/faults/gateway"] = Reply(200, {"affected": ["haproxy-west"]})
    assert actions.kill_gateway(WEST, configuration=conf)["affected"] == ["haproxy-west"]
    assert _posts(standin)[0] == (
        "/admin/us-west-1/faults/gateway",
        {"action": "kill", "owner": "drill/test/1"},
    )
    cleared = actions.clear_faults(WEST, configuration=conf)
    assert cleared["cleared"] is True and cleared["region"] == WEST and "at" in cleared
    assert _posts(standin)[-1] == ("/admin/us-west-1/faults/clear", None)


def test_devstack_only_faults_refuse_the_kubernetes_injector(standin: StandIn, tmp_path: Path) -> None:
    kube = {"fleet_config": _write(tmp_path, standin, "kube.yaml", injector="kubernetes")}
    with pytest.raises(actions.FaultNotInjected) as info:
        actions.degrade_region(WEST, added_latency_ms=1, configuration=kube)
    assert (
        str(info.value)
        == "fault 'degrade_region' needs the devstack injector; drills.fault_injector is 'kubernetes'"
    )
    with pytest.raises(actions.FaultNotInjected, match="^fault 'kill_gateway' needs the devstack injector"):
        actions.kill_gateway(WEST, configuration=kube)
    assert standin.calls == []


def test_admin_errors_and_owners(conf: dict[str, Any], standin: StandIn) -> None:
    cfg = chaos.fleet(conf)
    standin.replies["GET /admin/us-west-1/faults"] = Reply(200, {"owners": ["drill/a", "drill/b", "drill/a"]})
    assert faults.owners(cfg, WEST) == {"drill/a", "drill/b"}
    standin.replies["GET /admin/us-west-1/faults"] = Reply(200, {"owners": None})
    assert faults.owners(cfg, WEST) == set()
    assert standin.calls[-1][:3] == ("GET", "/admin/us-west-1/faults", None)
    standin.replies["POST /admin/us-west-1/faults/replicas"] = Reply(503, {"error": "busy"})
    with pytest.raises(Exception) as info:
        faults.admin(cfg.region(WEST), "/faults/replicas", {"a": 1})
    assert type(info.value).__name__ == "HTTPStatusError"
    no_admin = cfg.region(WEST).model_copy(update={"devstack_admin_url": None})
    with pytest.raises(faults.FaultNotInjected) as missing:
        faults.admin(no_admin, "/faults")
    assert str(missing.value) == "region us-west-1 has no devstack_admin_url in the fleet config"
    standin.replies["GET /admin/us-west-1/empty"] = Reply(200, None)
    assert faults.admin(cfg.region(WEST), "/empty", method="GET") == {}
    assert faults.clear_region(cfg, WEST)["cleared"] is True


def _completion(region: str | None, status: int = 200, header: str = "x-drctl-region") -> Reply:
    return Reply(status, {"choices": [{"text": "x"}]}, {header: region} if region is not None else {})


def test_success_ratio_and_traffic_share_count_completions(
    conf: dict[str, Any], standin: StandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    standin.completions[:] = [_completion(WEST), _completion(None, 500), _completion(EAST), _completion(EAST)]
    assert probes.global_success_ratio(requests=4, configuration=conf) == 0.75
    body = standin.calls[0][2]
    assert body == {"model": chaos.fleet(conf).workload.model, "prompt": "drill", "max_tokens": 1}
    assert standin.calls[0][1] == "/v1/completions" and "authorization" not in standin.calls[0][3]
    standin.reset()
    standin.completions[:] = [_completion(WEST), _completion(EAST), _completion(None, 503), _completion(WEST)]
    assert probes.traffic_share(WEST, requests=4, configuration=conf) == 0.5
    # Requests are bounded: at least one, at most 500.
    standin.reset()
    standin.completions[:] = [_completion(EAST)]
    assert probes.traffic_share(EAST, requests=0, configuration=conf) == 1.0
    assert len(standin.calls) == 1
    standin.reset()
    standin.completions[:] = [_completion(EAST)]
    assert probes.global_success_ratio(requests=-5, configuration=conf) == 1.0
    assert len(standin.calls) == 1
    # By default: 10 requests for the success ratio, 20 for a share.
    standin.reset()
    standin.completions[:] = [_completion(EAST)]
    assert probes.global_success_ratio(configuration=conf) == 1.0 and len(standin.calls) == 10
    assert probes.traffic_share(EAST, configuration=conf) == 1.0 and len(standin.calls) == 30
    # A custom header, and the fleet's bearer token when it has one.
    monkeypatch.setenv("UNIT_TOKEN", "s3cret")
    authed = {
        "fleet_config": _write(tmp_path, standin, "auth.yaml", auth_env="UNIT_TOKEN", header="x-served-by")
    }
    standin.reset()
    standin.completions[:] = [_completion(WEST, header="x-served-by")]
    assert probes.traffic_share(WEST, requests=2, configuration=authed) == 1.0
    assert standin.calls[0][3]["authorization"] == "Bearer s3cret"
    assert probes.traffic_share(WEST, requests=1, header="x-other", configuration=authed) == 0.0


def test_every_probe_request_is_a_new_bounded_connection(conf: dict[str, Any], standin: StandIn) -> None:
    # A new connection each time, so the global tier balances every request as a new user's.
    standin.completions[:] = [_completion(WEST)]
    assert probes.global_success_ratio(requests=3, configuration=conf) == 1.0
    assert len(set(standin.ports)) == 3
    # A reply slower than timeout_s is a failure, not a wait.
    standin.reset()
    standin.completions[:] = [Reply(200, {}, {"x-drctl-region": WEST}, delay_s=0.6)]
    assert probes.traffic_share(WEST, requests=1, timeout_s=0.2, configuration=conf) == 0.0


def test_a_failed_request_backs_off_only_briefly(conf: dict[str, Any], standin: StandIn) -> None:
    standin.completions[:] = [_completion(None, 500), _completion(EAST), _completion(EAST)]
    moved = probes.wait_for_traffic_moved(WEST, within_s=1.0, consecutive=2, configuration=conf)
    assert moved["moved"] and moved["after_s"] <= 1.5
    standin.reset()
    standin.completions[:] = [_completion(None, 500), _completion(EAST), _completion(EAST)]
    served = probes.wait_for_served(within_s=1.0, consecutive=2, configuration=conf)
    assert served["served"] and served["after_s"] <= 1.5
    # Only a failure backs off: ten successes in a row take no nap between them.
    standin.reset()
    standin.completions[:] = [_completion(EAST)]
    assert probes.wait_for_served(within_s=0.45, consecutive=10, configuration=conf)["served"]
    assert probes.wait_for_traffic_moved(WEST, within_s=0.45, consecutive=10, configuration=conf)["moved"]


def test_the_waits_default_to_ten_in_a_row_with_the_fleets_model_and_token(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("UNIT_TOKEN", "s3cret")
    authed = {
        "fleet_config": _write(
            tmp_path, standin, "auth-wait.yaml", auth_env="UNIT_TOKEN", header="x-served-by"
        )
    }
    model = probes.fleet(authed).workload.model
    for wait in (
        lambda: probes.wait_for_served(configuration=authed)["served"],
        lambda: probes.wait_for_traffic_moved(WEST, configuration=authed)["moved"],
        lambda: probes.global_success_ratio(requests=2, configuration=authed) == 1.0,
    ):
        standin.reset()
        standin.completions[:] = [_completion(EAST, header="x-served-by")]
        assert wait()
        assert len(standin.calls) in (2, 10)
        assert all(
            h["authorization"] == "Bearer s3cret" and body["model"] == model
            for _, _, body, h in standin.calls
        )


def test_an_answer_without_the_region_header_is_served_but_not_attributed(
    conf: dict[str, Any], standin: StandIn
) -> None:
    standin.completions[:] = [_completion(None)]
    assert probes.global_success_ratio(requests=2, configuration=conf) == 1.0
    assert probes.wait_for_served(within_s=2, consecutive=2, configuration=conf)["served"]
    with pytest.raises(TimeoutError):
        probes.wait_for_traffic_moved(WEST, within_s=0.3, consecutive=1, configuration=conf)


def test_the_waits_give_up_on_an_answer_slower_than_the_request_timeout(
    conf: dict[str, Any], standin: StandIn
) -> None:
    standin.completions[:] = [Reply(200, {}, {"x-drctl-region": EAST}, delay_s=0.6)]
    assert probes.global_success_ratio(requests=1, timeout_s=0.1, configuration=conf) == 0.0
    with pytest.raises(TimeoutError):
        probes.wait_for_served(within_s=0.3, consecutive=1, timeout_s=0.1, configuration=conf)
    with pytest.raises(TimeoutError):
        probes.wait_for_traffic_moved(WEST, within_s=0.3, consecutive=1, timeout_s=0.1, configuration=conf)


def test_probes_without_a_fleet_config_need_a_model(standin: StandIn) -> None:
    anonymous = {"global_endpoint": standin.url, "model": "m1"}
    standin.completions[:] = [_completion(WEST, header="x-drctl-region")]
    assert probes.traffic_share(WEST, requests=1, configuration=anonymous) == 1.0
    assert standin.calls[0][2]["model"] == "m1"
    with pytest.raises(ValueError) as info:
        probes.global_success_ratio(configuration={"global_endpoint": standin.url})
    assert str(info.value) == "experiment configuration names neither 'fleet_config' nor 'model'"


def test_an_unreachable_endpoint_fails_every_request() -> None:
    dead = {"global_endpoint": "http://127.0.0.1:9", "model": "m"}
    assert probes.global_success_ratio(requests=2, timeout_s=1, configuration=dead) == 0.0


def test_wait_for_traffic_moved_needs_a_streak_served_elsewhere(
    conf: dict[str, Any], standin: StandIn
) -> None:
    # West, a failure, and an unattributed answer all restart the streak.
    standin.completions[:] = [
        _completion(EAST),
        _completion(WEST),
        _completion(EAST),
        _completion(None, 500),
        _completion(EAST),
        _completion(""),
        _completion(EAST),
        _completion(EAST),
        _completion(EAST),
    ]
    out = probes.wait_for_traffic_moved(WEST, within_s=10, consecutive=3, configuration=conf)
    assert out["moved"] is True and out["region"] == WEST and 0 <= out["after_s"] < 10
    assert len(standin.calls) == 9
    standin.reset()
    standin.completions[:] = [_completion(WEST)]
    with pytest.raises(TimeoutError) as info:
        probes.wait_for_traffic_moved(WEST, within_s=0.3, consecutive=2, configuration=conf)
    assert str(info.value) == "traffic still reaches us-west-1, fails or is unattributed after 0.3s"


def test_wait_for_served_needs_a_streak_of_successes(conf: dict[str, Any], standin: StandIn) -> None:
    standin.completions[:] = [_completion(WEST), _completion(None, 500), _completion(""), _completion(WEST)]
    out = probes.wait_for_served(within_s=10, consecutive=2, configuration=conf)
    assert out["served"] is True and 0 <= out["after_s"] < 10 and len(standin.calls) == 4
    standin.reset()
    standin.completions[:] = [_completion(None, 500)]
    with pytest.raises(TimeoutError) as info:
        probes.wait_for_served(within_s=0.2, consecutive=2, configuration=conf)
    assert str(info.value) == "the global endpoint did not serve 2 requests in a row within 0.2s"
    # Failures back off instead of hammering the endpoint: a bounded number of requests.
    assert len(standin.calls) <= 10
