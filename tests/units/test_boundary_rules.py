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
