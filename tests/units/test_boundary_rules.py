"""check_boundary and its helpers, rule by rule, with the exact refusal each hole gets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from drctl.chaos import boundary as b
from drctl.config.schema import FleetConfig
from tests.support.config import tuned


def _violation(fn: Any, *args: Any, **kw: Any) -> str:
    with pytest.raises(b.BoundaryViolation) as info:
        fn(*args, **kw)
    return str(info.value)


def _exp(**sections: Any) -> dict[str, Any]:
    return {"title": "t", "configuration": {}, **sections}


def _py(module: str = "drctl.chaos.actions", func: str = "clear_faults", **args: Any) -> dict[str, Any]:
    return {"type": "python", "module": module, "func": func, "arguments": args}


def test_python_providers_only_from_drctls_chaos_functions(cfg: FleetConfig) -> None:
    ok = _exp(
        method=[
            {"name": "a", "provider": _py(region="us-west-1")},
            {"name": "p", "provider": _py("drctl.chaos.probes", "global_success_ratio")},
        ]
    )
    b.check_boundary(ok, {}, cfg)
    assert _violation(
        b.check_boundary, _exp(method=[{"name": "a", "provider": _py("os", "system")}]), {}, cfg
    ) == (
        "method[0] 'a': python module 'os' is not allowed; drills run only drctl.chaos.actions, drctl.chaos.probes"
    )
    assert _violation(
        b.check_boundary, _exp(method=[{"name": "a", "provider": _py(func="fleet")}]), {}, cfg
    ) == ("method[0] 'a': drctl.chaos.actions.fleet is not one of drctl's drill functions")
    assert _violation(
        b.check_boundary, _exp(method=[{"name": "a", "provider": _py(func="_load")}]), {}, cfg
    ) == ("method[0] 'a': drctl.chaos.actions._load is not one of drctl's drill functions")
    no_func = {"type": "python", "module": "drctl.chaos.probes"}
    assert _violation(b.check_boundary, _exp(method=[{"name": "a", "provider": no_func}]), {}, cfg) == (
        "method[0] 'a': drctl.chaos.probes.None is not one of drctl's drill functions"
    )
    bad_args = {**_py(), "arguments": ["x"]}
    assert _violation(b.check_boundary, _exp(rollbacks=[{"name": "r", "provider": bad_args}]), {}, cfg) == (
        "rollbacks[0] 'r': arguments must be a mapping"
    )
    for reserved in ("configuration", "secrets"):
        exp = _exp(rollbacks=[{"name": "r", "provider": _py(**{reserved: {}})}])
        assert _violation(b.check_boundary, exp, {}, cfg) == (
            f"rollbacks[0] 'r': argument {reserved!r} is reserved (chaoslib passes the checked one)"
        )


def test_allowed_functions_are_the_modules_own_public_ones() -> None:
    actions = b.allowed_functions("drctl.chaos.actions")
    assert {"kill_region_replicas", "clear_faults"} <= actions
    assert "fleet" not in actions and not any(n.startswith("_") for n in actions)
    assert "global_success_ratio" in b.allowed_functions("drctl.chaos.probes")


def test_http_providers_only_to_the_fleets_own_endpoints(cfg: FleetConfig) -> None:
    gateway = cfg.regions[1].gateway_url
    ok = _exp(
        **{
            "steady-state-hypothesis": {
                "probes": [
                    {"name": "g", "provider": {"type": "http", "url": "${global_endpoint}/health"}},
                    {
                        "name": "r",
                        "provider": {
                            "type": "http",
                            "url": gateway.upper().replace("HTTP", "http") + "/v1/models",
                        },
                    },
                ]
            }
        }
    )
    b.check_boundary(ok, {"global_endpoint": cfg.traffic.global_endpoint}, cfg)
    foreign = _exp(
        method=[{"name": "x", "provider": {"type": "http", "url": "http://169.254.169.254/latest"}}]
    )
    assert _violation(b.check_boundary, foreign, {}, cfg) == (
        "method[0] 'x': HTTP provider url 'http://169.254.169.254:80' is not the fleet's global endpoint or a "
        "region gateway"
    )
    no_url = _exp(method=[{"name": "x", "provider": {"type": "http"}}])
    assert _violation(b.check_boundary, no_url, {}, cfg).endswith(
        "HTTP provider url refused: a URL must be a string, not NoneType"
    )
    # The fleet's own host, read differently by another parser, is refused rather than guessed at.
    host = cfg.traffic.global_endpoint.removeprefix("http://")
    sneaky = _exp(method=[{"name": "x", "provider": {"type": "http", "url": f"http://{host}\\@evil.test/"}}])
    assert _violation(b.check_boundary, sneaky, {}, cfg).endswith("a URL must not contain a backslash")
    post = _exp(
        method=[
            {"name": "x", "provider": {"type": "http", "url": cfg.traffic.global_endpoint, "method": "post"}}
        ]
    )
    assert _violation(b.check_boundary, post, {}, cfg).endswith(
        "an HTTP probe may only GET or HEAD, not 'POST'"
    )


def test_fleet_origins_are_the_global_endpoint_and_every_gateway(cfg: FleetConfig) -> None:
    from drctl.config.urls import origin, parse_http_url

    urls = [cfg.traffic.global_endpoint, *(r.gateway_url for r in cfg.regions)]
    expected = {origin(parse_http_url(u)) for u in urls}
    assert b.fleet_origins(cfg) == expected and len(expected) == 3


def test_every_other_provider_kind_and_forbidden_key_is_refused(cfg: FleetConfig) -> None:
    assert (
        _violation(
            b.check_boundary,
            _exp(method=[{"name": "sh", "provider": {"type": "process", "path": "sh"}}]),
            {},
            cfg,
        )
        == "method[0] 'sh': provider type 'process' is not allowed in a drill (only python and http)"
    )
    assert _violation(b.check_boundary, _exp(method=[{"name": "x", "provider": "python"}]), {}, cfg) == (
        "method[0] 'x': provider must be a mapping"
    )
    assert _violation(b.check_boundary, _exp(controls=[{"name": "c"}]), {}, cfg) == (
        "controls: not allowed in a drill (controls load arbitrary python modules)"
    )
    assert _violation(b.check_boundary, _exp(method=[{"name": "a", "secrets": ["k"]}]), {}, cfg) == (
        "method[0].secrets: not allowed in a drill (secrets read credentials from the environment or a vault)"
    )
    # A process entry anywhere, even outside a provider key, is refused.
    assert _violation(b.check_boundary, _exp(extensions=[{"name": "x", "type": "process"}]), {}, cfg) == (
        "extensions[0]: process providers are never allowed in a drill"
    )
    nested = _exp(extensions=[{"name": "drctl", "deep": {"provider": _py("subprocess", "run")}}])
    assert _violation(b.check_boundary, nested, {}, cfg).startswith(
        "extensions[0].deep 'None': python module 'subprocess'"
    )


def test_dynamic_configuration_may_read_only_drctls_keys_and_the_fleets_allowed_env(cfg: FleetConfig) -> None:
    ok = _exp(
        configuration={
            "target_region": {"type": "env", "key": "DRCTL_DRILL_TARGET"},
            "plain": 3,
            "mapping": {"a": 1},
        }
    )
    b.check_boundary(ok, {}, cfg, configuration_only=True)
    vault = _exp(configuration={"x": {"type": "vault", "path": "secret/x"}})
    assert _violation(b.check_boundary, vault, {}, cfg) == (
        "configuration.x: dynamic configuration of type 'vault' is not allowed in a drill"
    )
    message = _violation(
        b.check_boundary, _exp(configuration={"region": {"type": "env", "key": "HOME"}}), {}, cfg
    )
    assert message == (
        "configuration.region: may not read environment variable 'HOME'; a drill reads only drctl's own "
        "fleet_config<-DRCTL_CONFIG, global_endpoint<-DRCTL_GLOBAL_ENDPOINT, target_region<-DRCTL_DRILL_TARGET, "
        "rto_target_s<-DRCTL_RTO_TARGET_S (values drctl supplies) and the names in the fleet's "
        "drills.allowed_env (none)"
    )
    # A name that looks like a drctl knob is not allowed by its looks: only the fleet config allows.
    knob = _exp(configuration={"rps": {"type": "env", "key": "DRCTL_RPS"}})
    assert "may not read environment variable 'DRCTL_RPS'" in _violation(b.check_boundary, knob, {}, cfg)
    allowing = tuned(cfg, "drills", allowed_env=["DRCTL_RPS"])
    b.check_boundary(knob, {}, allowing, configuration_only=True)
    odd = _exp(configuration={"rps": {"type": "env", "key": "DRCTL_RPS", "path": "/etc/shadow"}})
    assert (
        _violation(b.check_boundary, odd, {}, allowing) == "configuration.rps: unknown env entry keys: path"
    )
    # configuration_only stops before the providers.
    b.check_boundary(
        _exp(method=[{"name": "sh", "provider": {"type": "process"}}]), {}, cfg, configuration_only=True
    )


def test_env_names_are_drctls_own_pairs_or_the_fleets_allowed_env(cfg: FleetConfig) -> None:
    assert b._env_allowed("fleet_config", "DRCTL_CONFIG", cfg)
    assert not b._env_allowed("fleet_config", "DRCTL_GLOBAL_ENDPOINT", cfg)
    assert not b._env_allowed("rps", "DRCTL_RPS", cfg)
    allowing = tuned(cfg, "drills", allowed_env=["DRCTL_RPS"])
    assert b._env_allowed("anything", "DRCTL_RPS", allowing)
    assert not b._env_allowed("rps", "drctl_rps", allowing)
    assert not b._env_allowed("rps", ["DRCTL_RPS"], allowing)


def test_a_provider_outside_an_activity_position_is_refused(cfg: FleetConfig) -> None:
    probe = {"name": "p", "provider": _py("drctl.chaos.probes", "global_success_ratio")}
    tolerance = _exp(method=[{"name": "a", "provider": _py(), "tolerance": {"type": "probe", **probe}}])
    assert _violation(b.check_boundary, tolerance, {}, cfg).startswith(
        "method[0].tolerance: a provider is allowed only in an activity"
    )
    ref = _exp(method=[{"ref": "a"}])
    assert _violation(b.check_boundary, ref, {}, cfg) == (
        "method[0]: activity references are not allowed; write the activity out"
    )


def test_providers_are_judged_by_the_function_they_call() -> None:
    assert b.role(_py("drctl.chaos.actions", "kill_gateway")) == "fault"
    assert b.role(_py("drctl.chaos.actions", "clear_faults")) == "rollback"
    assert b.role(_py("drctl.chaos.probes", "traffic_share")) == "probe"
    assert b.role({"type": "http", "url": "http://x"}) == "probe"


def test_walk_names_every_node_by_its_path() -> None:
    assert list(b._walk({"a": [1, {"b": 2}]}, "")) == [
        ("", {"a": [1, {"b": 2}]}),
        ("a", [1, {"b": 2}]),
        ("a[0]", 1),
        ("a[1]", {"b": 2}),
        ("a[1].b", 2),
    ]


@pytest.mark.parametrize("name", ["region-outage", "a", "A.b_c-9", "x" * 100])
def test_safe_names_pass(name: str) -> None:
    assert b.safe_name(name) == name


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "-flag", "a..b", "x" * 101, "a b", "a\n"])
def test_names_that_could_leave_a_directory_are_refused(name: str) -> None:
    assert _violation(b.safe_name, name) == (
        f"name {name!r} is not allowed: use letters, digits, '.', '_' and '-' only"
    )


def test_canonical_text_replaces_the_configuration_and_is_stable() -> None:
    exp = {"b": 1, "configuration": {"x": {"type": "env", "key": "DRCTL_X"}}, "a": [2]}
    text = b.canonical(exp, {"x": "resolved"})
    assert text == json.dumps(
        {"a": [2], "b": 1, "configuration": {"x": "resolved"}}, indent=1, sort_keys=True
    )
    assert b.digest(text) == __import__("hashlib").sha256(text.encode()).hexdigest()
    assert _violation(b.canonical, {"a": {1, 2}}, {}).startswith("not representable as a JSON experiment: ")


def test_every_configuration_entry_is_checked_and_the_root_is_named_plainly(cfg: FleetConfig) -> None:
    later = _exp(configuration={"plain": 1, "x": {"type": "env", "key": "HOME"}})
    assert _violation(b.check_boundary, later, {}, cfg).startswith(
        "configuration.x: may not read environment variable"
    )
    assert _violation(b.check_boundary, {"provider": {"type": "process"}}, {}, cfg) == (
        " 'None': provider type 'process' is not allowed in a drill (only python and http)"
    )
    assert _violation(b.check_boundary, {"type": "process"}, {}, cfg) == (
        ": process providers are never allowed in a drill"
    )


def test_chaos_run_gets_only_basics_and_names_the_fleet_config_names(cfg: FleetConfig) -> None:
    from drctl.chaos.runenv import chaos_env
    from drctl.config.schema import WorkloadAuth

    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/w",
        "LANG": "C.UTF-8",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "AWS_SESSION_TOKEN": "aws-session",
        "TEMPORAL_API_KEY": "temporal-secret",
        "SOME_UNNAMED_CREDENTIAL": "x",
        "DRCTL_KNOB": "1",
        "VLLM_TOKEN": "vllm-secret",
    }
    env = chaos_env(cfg, environ)
    assert {k for k in env if k in environ} == {"PATH", "HOME", "LANG"}
    named = cfg.model_copy(
        update={
            "drills": cfg.drills.model_copy(update={"allowed_env": ["DRCTL_KNOB"]}),
            "workload": cfg.workload.model_copy(update={"auth": WorkloadAuth(token_env="VLLM_TOKEN")}),
        }
    )
    env = chaos_env(named, environ)
    assert {k for k in env if k in environ} == {"PATH", "HOME", "LANG", "DRCTL_KNOB", "VLLM_TOKEN"}


def _http_exp(cfg: FleetConfig, **provider: Any) -> dict[str, Any]:
    return _exp(
        method=[{"name": "h", "provider": {"type": "http", "url": cfg.traffic.global_endpoint, **provider}}]
    )


def test_an_http_probes_retries_timeout_tls_and_method_at_their_edges(cfg: FleetConfig) -> None:
    for ok in (
        {"max_retries": 0},
        {"max_retries": 3},
        {"timeout": 60},
        {"timeout": 0.001},
        {"method": "head"},
        {"method": "GET"},
        {"verify_tls": True},
    ):
        b.check_boundary(_http_exp(cfg, **ok), {}, cfg)
    for bad, why in [
        ({"max_retries": 4}, "max_retries must be an integer 0..3"),
        ({"max_retries": -1}, "max_retries must be an integer 0..3"),
        ({"max_retries": True}, "max_retries must be an integer 0..3"),
        ({"max_retries": 1.0}, "max_retries must be an integer 0..3"),
        ({"timeout": 0}, "timeout must be a number of seconds in (0, 60]"),
        ({"timeout": 60.01}, "timeout must be a number of seconds in (0, 60]"),
        ({"timeout": True}, "timeout must be a number of seconds in (0, 60]"),
        ({"timeout": [1, 2]}, "timeout must be a number of seconds in (0, 60]"),
        ({"verify_tls": False}, "an HTTP probe may not turn off TLS verification"),
        ({"verify_tls": "yes"}, "an HTTP probe may not turn off TLS verification"),
        ({"method": "x" * 30}, f"an HTTP probe may only GET or HEAD, not {'X' * 20!r}"),
    ]:
        assert _violation(b.check_boundary, _http_exp(cfg, **bad), {}, cfg) == f"method[0] 'h': {why}", bad
    extra = _http_exp(cfg, allow_redirects=False, follow_redirects=False)
    assert _violation(b.check_boundary, extra, {}, cfg) == (
        "method[0] 'h': unknown HTTP provider key(s) 'allow_redirects', 'follow_redirects': Chaos Toolkit "
        "ignores them, and a drill's HTTP probe never follows a redirect"
    )


def test_a_python_call_of_the_http_probe_is_judged_as_an_http_provider(cfg: FleetConfig) -> None:
    url = cfg.traffic.global_endpoint
    call = _py("drctl.chaos.probes", "http_request", url=url)
    b.check_boundary(_exp(method=[{"name": "p", "provider": call}]), {}, cfg)
    assert b.http_view(call) == {"url": url, "method": "GET", "timeout": 5, "max_retries": 0}
    loud = _py("drctl.chaos.probes", "http_request", url=url, method="DELETE", timeout=9, max_retries=2)
    assert b.http_view(loud) == {"url": url, "method": "DELETE", "timeout": 9, "max_retries": 2}
    assert _violation(b.check_boundary, _exp(method=[{"name": "p", "provider": loud}]), {}, cfg) == (
        "method[0] 'p': an HTTP probe may only GET or HEAD, not 'DELETE'"
    )
    away = _py("drctl.chaos.probes", "http_request", url="http://127.0.0.1:1/")
    assert "is not the fleet's global endpoint" in _violation(
        b.check_boundary, _exp(method=[{"name": "p", "provider": away}]), {}, cfg
    )
    # Other probes' arguments are not URLs: never judged as one.
    assert b.http_view({"type": "http", "url": "u"}) == {"type": "http", "url": "u"}
    assert b.http_view({"type": "python"}) == {"url": None, "method": "GET", "timeout": 5, "max_retries": 0}


def test_what_runs_for_an_http_provider_is_drctls_probe_on_the_checked_url(cfg: FleetConfig) -> None:
    url = cfg.traffic.global_endpoint
    http = {"type": "http", "url": f"{url}/health", "method": "head", "timeout": 3, "max_retries": 1}
    assert b.as_run("w", http, {}, cfg) == {
        "type": "python",
        "module": "drctl.chaos.probes",
        "func": "http_request",
        "arguments": {"url": f"{url}/health", "method": "HEAD", "timeout": 3, "max_retries": 1},
    }
    full = {"type": "http", "url": url, "headers": {"A": "1"}, "arguments": {"q": "2"}}
    assert b.as_run("w", full, {}, cfg)["arguments"] == {  # type: ignore[index]
        "url": url,
        "method": "GET",
        "timeout": 5,
        "max_retries": 0,
        "headers": {"A": "1"},
        "params": {"q": "2"},
    }
    call = _py("drctl.chaos.probes", "http_request", url="${global_endpoint}/x", timeout=2)
    assert b.as_run("w", call, {"global_endpoint": url}, cfg) == {
        **call,
        "arguments": {"url": f"{url}/x", "timeout": 2},
    }
    assert b.as_run("w", _py(), {}, cfg) is None
    assert b.as_run("w", _py("drctl.chaos.probes", "traffic_share"), {}, cfg) is None


def test_a_checked_value_never_comes_from_the_environment() -> None:
    assert b.resolved("w", {"a": "${x}", "b": 2}, {"x": "us-west-1"}) == {"a": "us-west-1", "b": 2}
    assert b.resolved("w", "${n}", {"n": 30.5}) == 30.5
    assert _violation(b.resolved, "w", {"a": "${x}"}, {"x": b.ENV_SENTINEL}) == (
        "w: a checked value may not come from an environment variable (it is not known until the run); "
        "write the value, or use ${target_region}"
    )


def test_the_configuration_that_runs_and_the_one_the_checks_read(cfg: FleetConfig) -> None:
    allowing = tuned(cfg, "drills", allowed_env=["DRCTL_KNOB"])
    exp = _exp(
        configuration={
            "target_region": {"type": "env", "key": "DRCTL_DRILL_TARGET", "default": "us-east-1"},
            "rto_target_s": {"type": "env", "key": "DRCTL_RTO_TARGET_S", "default": "30"},
            "knob": {"type": "env", "key": "DRCTL_KNOB", "default": "1", "env_var_type": "int"},
            "plain": [1],
        }
    )
    run, check = b.configuration_for(exp, {"rto_target_s": 45.0, "fleet_config": "/f.yaml"}, allowing)
    assert run == {
        "target_region": "us-east-1",
        "knob": {"default": "1", "env_var_type": "int", "key": "DRCTL_KNOB", "type": "env"},
        "plain": [1],
        "rto_target_s": 45.0,
        "fleet_config": "/f.yaml",
    }
    assert check == {
        "target_region": "us-east-1",
        "knob": b.ENV_SENTINEL,
        "plain": [1],
        "rto_target_s": 45.0,
        "fleet_config": "/f.yaml",
    }
    assert list(run["knob"]) == ["default", "env_var_type", "key", "type"]  # sorted: one canonical text
    assert _violation(b.configuration_for, _exp(configuration=["x"]), {}, cfg) == (
        "configuration must be a mapping"
    )
    for key in ("", "a b", "x" * 101, "-x", "a/b"):
        assert _violation(b.configuration_for, _exp(configuration={key: 1}), {}, cfg) == (
            f"configuration key {key[:40]!r} is not a plain name"
        )
    assert b.configuration_for(_exp(configuration=None), {}, cfg) == ({}, {})


def test_an_activity_stands_only_at_its_own_path_as_its_own_object(cfg: FleetConfig) -> None:
    fault = {"type": "action", "name": "f", "provider": _py(func="kill_gateway", region="us-west-1")}
    # One object in two places (what a YAML alias makes): the method may hold it, a tolerance may not.
    hypo = {
        "probes": [
            {"name": "p", "provider": _py("drctl.chaos.probes", "wait_for_served"), "tolerance": fault}
        ]
    }
    shared = _exp(method=[fault], **{"steady-state-hypothesis": hypo})
    assert _violation(b.check_boundary, shared, {}, cfg).startswith(
        "steady-state-hypothesis.probes[0].tolerance: a provider is allowed only in an activity"
    )
    # A key spelled like an activity's path is not one.
    forged = {"title": "t", "configuration": {}, "method[0]": fault}
    assert _violation(b.check_boundary, forged, {}, cfg).startswith(
        "method[0]: a provider is allowed only in an activity"
    )
    b.check_boundary(_exp(method=[fault], rollbacks=[fault]), {}, cfg)
    assert b._activity_positions(
        {"steady-state-hypothesis": {"probes": [fault, "x"]}, "method": "m", "rollbacks": [1, fault]}
    ) == {"steady-state-hypothesis.probes[0]": id(fault), "rollbacks[1]": id(fault)}
    assert b._activity_positions({"steady-state-hypothesis": "h"}) == {}


def test_a_function_name_that_is_not_plain_is_quoted(cfg: FleetConfig) -> None:
    odd = {"type": "python", "module": "drctl.chaos.actions", "func": "x\x1b[2J"}
    assert _violation(b.check_boundary, _exp(method=[{"name": "a", "provider": odd}]), {}, cfg) == (
        "method[0] 'a': drctl.chaos.actions.'x\\x1b[2J' is not one of drctl's drill functions"
    )
    number = {"type": "python", "module": "drctl.chaos.actions", "func": 7}
    assert _violation(b.check_boundary, _exp(method=[{"name": "a", "provider": number}]), {}, cfg) == (
        "method[0] 'a': drctl.chaos.actions.7 is not one of drctl's drill functions"
    )
    assert b.role({"type": "http", "module": "drctl.chaos.actions", "func": "kill_gateway"}) == "probe"
    assert b.role({"module": "drctl.chaos.actions", "func": "clear_faults"}) == "probe"


def test_the_env_sentinel_is_found_wherever_it_sits() -> None:
    s = b.ENV_SENTINEL
    assert not b._mentions_env({"a": [1, "x", {"b": None}], "c": 2.5})
    for value in (s, f"http://{s}/x", [1, s], (s,), {"k": s}, {s: 1}, {"a": [{"b": f"x{s}"}]}):
        assert b._mentions_env(value), value
