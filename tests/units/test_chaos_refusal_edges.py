"""The drill boundary and the experiment validation at their edges (issue 28): each refusal names the
file, the activity and what is wrong, in full, and the text that runs is the checked one."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from drctl.chaos import boundary as b
from drctl.chaos import validate as v
from drctl.config.schema import FleetConfig
from tests.support.config import shipped_experiment, tuned


def _violation(fn: Any, *args: Any, **kw: Any) -> str:
    with pytest.raises(b.BoundaryViolation) as info:
        fn(*args, **kw)
    return str(info.value)


def _write(directory: Path, name: str, content: Any) -> Path:
    path = directory / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def _refusal(path: Path, cfg: FleetConfig, target: str | None = None) -> str:
    with pytest.raises(v.ExperimentInvalid) as info:
        v.validate_experiment(path, cfg, target=target)
    assert info.value.path == str(path)
    prefix = f"{path}: "
    assert str(info.value).startswith(prefix)
    return str(info.value)[len(prefix) :]


def _http(url: str, **more: Any) -> dict[str, Any]:
    return {"type": "http", "url": url, **more}


def _probe_call(**args: Any) -> dict[str, Any]:
    return {"type": "python", "module": "drctl.chaos.probes", "func": "http_request", "arguments": args}


ENV_REFUSAL = (
    "a checked value may not come from an environment variable (it is not known until the run); "
    "write the value, or use ${target_region}"
)


# --- boundary.py ---


def test_an_http_url_from_the_environment_is_refused_where_it_stands(cfg: FleetConfig) -> None:
    conf = {"knob": b.ENV_SENTINEL}
    exp = {"title": "t", "method": [{"name": "h", "provider": _http("${knob}/health")}]}
    assert _violation(b.check_boundary, exp, conf, cfg) == f"method[0] 'h': {ENV_REFUSAL}"
    call = {"title": "t", "method": [{"name": "c", "provider": _probe_call(url="${knob}")}]}
    assert _violation(b.check_boundary, call, conf, cfg) == f"method[0] 'c': {ENV_REFUSAL}"
    assert _violation(b.as_run, "rollbacks[1] 'x'", _http("${knob}"), conf, cfg) == (
        f"rollbacks[1] 'x': {ENV_REFUSAL}"
    )


def test_a_python_call_of_the_http_probe_is_checked_after_substitution(cfg: FleetConfig) -> None:
    # ${global_endpoint} is the fleet's own endpoint once the configuration is substituted.
    call = {"title": "t", "method": [{"name": "c", "provider": _probe_call(url="${global_endpoint}/x")}]}
    b.check_boundary(call, {"global_endpoint": cfg.traffic.global_endpoint}, cfg)
    assert "url refused" in _violation(b.check_boundary, call, {}, cfg)


def test_unknown_http_keys_are_shown_cut_at_40_characters(cfg: FleetConfig) -> None:
    long = "k" * 50
    exp = {"method": [{"name": "h", "provider": _http(cfg.traffic.global_endpoint, **{long: 1})}]}
    assert _violation(b.check_boundary, exp, {}, cfg) == (
        f"method[0] 'h': unknown HTTP provider key(s) {'k' * 40!r}: Chaos Toolkit ignores them, and a "
        "drill's HTTP probe never follows a redirect"
    )


def test_env_refusals_list_every_allowed_name_and_unknown_key(cfg: FleetConfig) -> None:
    allowing = tuned(cfg, "drills", allowed_env=["DRCTL_A", "DRCTL_B"])
    home = {"configuration": {"x": {"type": "env", "key": "HOME"}}}
    assert _violation(b.check_boundary, home, {}, allowing).endswith(
        "and the names in the fleet's drills.allowed_env (DRCTL_A, DRCTL_B)"
    )
    odd = {"configuration": {"x": {"type": "env", "key": "DRCTL_A", "path": "/p", "cmd": "c"}}}
    assert _violation(b.check_boundary, odd, {}, allowing) == (
        "configuration.x: unknown env entry keys: cmd, path"
    )


def test_a_provider_outside_an_activity_gets_the_whole_explanation(cfg: FleetConfig) -> None:
    probe = {"type": "python", "module": "drctl.chaos.probes", "func": "global_success_ratio"}
    exp = {"extensions": [{"name": "drctl", "provider": probe}]}
    assert _violation(b.check_boundary, exp, {}, cfg) == (
        "extensions[0]: a provider is allowed only in an activity of the steady-state hypothesis, "
        "method or rollbacks (not in a tolerance, configuration or extension)"
    )


def test_the_text_that_runs_is_strict_json() -> None:
    for number in (float("nan"), float("inf")):
        assert _violation(b.canonical, {"tags": [number]}, {}) == (
            f"not representable as a JSON experiment: Out of range float values are not JSON compliant: {number}"
        )


def test_a_text_that_is_not_utf8_still_gets_a_digest() -> None:
    # A lone surrogate (what a \ud800 escape in JSON reads as) is digested as it stands; the loader refuses it.
    assert b.digest("a\ud800") == hashlib.sha256(b"a\xed\xa0\x80").hexdigest()


# --- validate.py ---


def test_an_experiment_over_the_size_limit_is_refused_by_name(cfg: FleetConfig, tmp_path: Path) -> None:
    big = _write(tmp_path, "big.json", '{"title": "' + "x" * (256 << 10) + '"}')
    assert _refusal(big, cfg) == "larger than the 262,144-byte limit"


def test_an_empty_method_is_refused_as_having_no_fault(cfg: FleetConfig, tmp_path: Path) -> None:
    exp = shipped_experiment()
    exp["method"] = []
    assert _refusal(_write(tmp_path, "empty.json", exp), cfg) == "method needs at least one fault action"
    # Refused with the shape checks, before anything else reads the document.
    with pytest.raises(v.ExperimentInvalid) as info:
        v._required("p", exp)
    assert str(info.value) == "p: method needs at least one fault action"


def test_an_activity_that_is_not_a_mapping_is_shown_cut_at_60_characters(
    cfg: FleetConfig, tmp_path: Path
) -> None:
    exp = shipped_experiment()
    exp["method"].append("r" * 80)
    assert _refusal(_write(tmp_path, "ref.json", exp), cfg) == (
        "method: each activity must be a mapping written out in full (references are not allowed), "
        f"not {'r' * 60!r}"
    )


def _with_env_knob(exp: dict[str, Any]) -> dict[str, Any]:
    exp["configuration"]["knob"] = {"type": "env", "key": "DRCTL_KNOB"}
    return exp


def test_pauses_and_fault_arguments_may_not_come_from_the_environment(
    cfg: FleetConfig, tmp_path: Path
) -> None:
    allowing = tuned(cfg, "drills", allowed_env=["DRCTL_KNOB"])
    paused = _with_env_knob(shipped_experiment())
    paused["method"][0]["pauses"] = {"after": "${knob}"}
    assert _refusal(_write(tmp_path, "paused.json", paused), allowing) == (
        f"method 'kill-all-target-region-replicas' pauses: {ENV_REFUSAL}"
    )
    aimed = _with_env_knob(shipped_experiment())
    aimed["method"][0]["provider"]["arguments"]["region"] = "${knob}"
    assert _refusal(_write(tmp_path, "aimed.json", aimed), allowing) == (
        f"method action 'kill-all-target-region-replicas' (kill_region_replicas): {ENV_REFUSAL}"
    )


def test_pauses_that_are_not_a_mapping_are_judged_as_one_pause(cfg: FleetConfig) -> None:
    # chaoslib refuses such pauses first (see test_validate_rules); the check stands on its own too.
    v._check_pauses("p", "method", {"name": "a", "pauses": 5}, {}, cfg)
    with pytest.raises(v.ExperimentInvalid) as info:
        v._check_pauses("p", "method", {"name": "a", "pauses": -1}, {}, cfg)
    assert str(info.value) == (
        f"p: method 'a': pause pauses must be 0..{cfg.drills.timeout_s:g} seconds (drills.timeout_s)"
    )


def test_an_unknown_track_is_named_cut_short_with_the_known_ones(cfg: FleetConfig, tmp_path: Path) -> None:
    for track, shown in (("purple", "purple"), ("t" * 50, "t" * 40)):
        exp = shipped_experiment()
        exp["method"][0]["provider"]["arguments"]["track"] = track
        assert _refusal(_write(tmp_path, "track.json", exp), cfg) == (
            f"method action 'kill-all-target-region-replicas' (kill_region_replicas): track {shown!r} is not "
            "one of stable, canary, blue, green"
        )


def test_a_fault_without_a_track_needs_a_rollback_of_its_region(cfg: FleetConfig, tmp_path: Path) -> None:
    exp = shipped_experiment("gateway-loss")
    exp["rollbacks"] = [
        {
            "type": "probe",
            "name": "look",
            "provider": {"type": "python", "module": "drctl.chaos.probes", "func": "global_success_ratio"},
        }
    ]
    assert _refusal(_write(tmp_path, "gateway.json", exp), cfg, target="us-east-1") == (
        "method fault 'kill-target-region-gateway' (kill_gateway) has no rollback that undoes it: add a "
        "rollbacks entry calling drctl.chaos.actions.clear_faults on region 'us-east-1'"
    )


def test_the_plan_runs_every_http_probe_as_drctls_own(cfg: FleetConfig, tmp_path: Path) -> None:
    exp = shipped_experiment()
    exp["steady-state-hypothesis"]["probes"].append(
        {
            "type": "probe",
            "name": "health",
            "provider": _http("${global_endpoint}/health", method="head"),
            "tolerance": 200,
        }
    )
    plan = v.validate_experiment(_write(tmp_path, "http.json", exp), cfg)
    ran = json.loads(plan.text)["steady-state-hypothesis"]["probes"][-1]
    assert ran["provider"] == {
        "type": "python",
        "module": "drctl.chaos.probes",
        "func": "http_request",
        "arguments": {
            "url": f"{cfg.traffic.global_endpoint}/health",
            "method": "HEAD",
            "timeout": 5,
            "max_retries": 0,
        },
    }


def test_the_canonical_document_leaves_the_experiment_as_read(cfg: FleetConfig) -> None:
    exp = {"method": [{"name": "h", "provider": _http(cfg.traffic.global_endpoint)}]}
    before = json.dumps(exp)
    doc = v._canonical_doc(exp, {"k": 1}, {}, cfg)
    assert json.dumps(exp) == before
    assert doc["method"][0]["provider"]["func"] == "http_request" and doc["configuration"] == {"k": 1}
    away = {"method": [{"name": "h", "provider": _http("http://127.0.0.1:1/")}]}
    assert _violation(v._canonical_doc, away, {}, {}, cfg).startswith("method 'h': HTTP provider url ")


def test_drctls_own_keys_need_no_default_in_the_environment(
    cfg: FleetConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # drctl supplies fleet_config and target_region; Chaos Toolkit's validation sees drctl's values,
    # not env entries it would have to read from an environment that does not have them.
    for name in ("DRCTL_CONFIG", "DRCTL_DRILL_TARGET"):
        monkeypatch.delenv(name, raising=False)
    exp = shipped_experiment()
    exp["configuration"]["fleet_config"] = {"type": "env", "key": "DRCTL_CONFIG"}
    exp["configuration"]["target_region"] = {"type": "env", "key": "DRCTL_DRILL_TARGET"}
    plan = v.validate_experiment(_write(tmp_path, "bare.json", exp), cfg, target="us-west-1")
    assert plan.configuration["target_region"] == "us-west-1"


@pytest.mark.parametrize(
    ("step", "attribute"),
    [
        ("drill boundary", "check_boundary"),
        ("fault targets", "_check_targets"),
        ("activity arguments", "check_calls"),
    ],
)
def test_a_crash_in_any_step_is_a_refusal_naming_the_step(
    step: str, attribute: str, cfg: FleetConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # chaoslib answers some malformed documents with a bare TypeError (see _guarded): whichever step
    # it happens in, the user gets the file and the step, not a traceback.
    def crash(*_: Any) -> None:
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setattr(v, attribute, crash)
    path = _write(tmp_path, "outage.json", shipped_experiment())
    assert _refusal(path, cfg) == f"{step}: malformed experiment (TypeError: unhashable type: 'list')"
