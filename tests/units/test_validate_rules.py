"""validate_experiment, rule by rule: each broken experiment is refused with the exact message a user
acts on, and a valid one yields exactly the plan the worker will run."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.chaos import validate as v
from drctl.chaos.boundary import BoundaryViolation, canonical, digest
from drctl.config.schema import FleetConfig, load_config
from tests.support.config import fleet_config_data, shipped_experiment, tuned, write_drill_config

Breaker = Callable[[dict[str, Any]], Any]


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


def _broken(fn: Breaker, name: str = "region-outage") -> dict[str, Any]:
    exp = shipped_experiment(name)
    fn(exp)
    return exp


def _action(exp: dict[str, Any]) -> dict[str, Any]:
    return exp["method"][0]


# case → (experiment broken one way, the exact refusal)
SHAPE_CASES: dict[str, tuple[Breaker, str]] = {
    "missing-keys": (
        lambda e: [e.pop(k) for k in ("title", "description", "configuration")],
        "missing required key(s): title, description, configuration",
    ),
    "missing-hypothesis": (
        lambda e: e.pop("steady-state-hypothesis"),
        "missing required key(s): steady-state-hypothesis",
    ),
    "missing-method": (lambda e: e.pop("method"), "missing required key(s): method"),
    "hypothesis-not-mapping": (
        lambda e: e.update({"steady-state-hypothesis": ["x"]}),
        "steady-state-hypothesis needs a list of at least one probe against the global endpoint",
    ),
    "hypothesis-no-probes": (
        lambda e: e["steady-state-hypothesis"].update(probes=[]),
        "steady-state-hypothesis needs a list of at least one probe against the global endpoint",
    ),
    "hypothesis-probes-not-list": (
        lambda e: e["steady-state-hypothesis"].update(probes={"a": 1}),
        "steady-state-hypothesis needs a list of at least one probe against the global endpoint",
    ),
    "method-not-list": (lambda e: e.update(method="kill"), "method must be a list of activities, not str"),
    "rollbacks-not-list": (
        lambda e: e.update(rollbacks={"a": 1}),
        "rollbacks must be a list of activities, not dict",
    ),
    "activity-not-mapping": (
        lambda e: e["method"].append(7),
        "method: each activity must be a mapping written out in full (references are not allowed), not '7'",
    ),
    "probe-not-mapping": (
        lambda e: e["steady-state-hypothesis"]["probes"].append(1.5),
        "steady-state-hypothesis: each activity must be a mapping written out in full "
        "(references are not allowed), not '1.5'",
    ),
    "rollback-not-mapping": (
        lambda e: e["rollbacks"].append(None),
        "rollbacks: each activity must be a mapping written out in full (references are not allowed), not 'None'",
    ),
    "provider-not-mapping": (
        lambda e: _action(e).update(provider=7),
        "method 'kill-all-target-region-replicas': provider must be a mapping, not 7",
    ),
    "no-fault-action": (
        lambda e: e.update(method=[e["method"][1]]),
        "method needs at least one fault action",
    ),
    "method-only-references": (
        lambda e: e.update(method=["kill"]),
        "method: each activity must be a mapping written out in full (references are not allowed), not 'kill'",
    ),
    "fault-only-by-type": (
        lambda e: e.update(method=[{**e["method"][1], "type": "action"}]),
        "method needs at least one fault action",
    ),
    "no-rollbacks": (lambda e: e.update(rollbacks=[]), "rollbacks are required: a drill must undo its fault"),
    "rollbacks-absent": (lambda e: e.pop("rollbacks"), "rollbacks are required: a drill must undo its fault"),
    "extensions-not-list": (lambda e: e.update(extensions={"name": "drctl"}), "extensions must be a list"),
    "configuration-not-mapping": (
        lambda e: e.update(configuration=["target_region"]),
        "configuration must name the target_region",
    ),
    "no-target-region": (
        lambda e: e["configuration"].pop("target_region"),
        "configuration must name the target_region",
    ),
    "no-drctl-extension": (
        lambda e: e.update(extensions=[{"name": "other", "expect_failover": True}]),
        'extensions needs {"name": "drctl", "expect_failover": true|false}: does this fault fail over?',
    ),
    "expectation-not-bool": (
        lambda e: e["extensions"][0].update(expect_failover="yes"),
        'extensions needs {"name": "drctl", "expect_failover": true|false}: does this fault fail over?',
    ),
    "extensions-absent": (
        lambda e: e.pop("extensions"),
        'extensions needs {"name": "drctl", "expect_failover": true|false}: does this fault fail over?',
    ),
}


def test_probes_are_judged_by_what_they_call_not_their_type(cfg: FleetConfig, tmp_path: Path) -> None:
    # A probe function written as an action, and an HTTP GET of the fleet's own endpoint in the
    # rollbacks, hurt nothing: they pass, and the plan lists them as probes.
    exp = _broken(
        lambda e: (
            e["method"].insert(
                0,
                {
                    "type": "action",
                    "name": "probe-as-action",
                    "provider": {
                        "type": "python",
                        "module": "drctl.chaos.probes",
                        "func": "global_success_ratio",
                    },
                },
            ),
            e["rollbacks"].append(
                {
                    "type": "action",
                    "name": "poke",
                    "provider": {"type": "http", "url": "${global_endpoint}/health"},
                }
            ),
        )
    )
    plan = v.validate_experiment(_write(tmp_path, "judged.json", exp), cfg)
    assert "probe-as-action" in plan.probes and "probe-as-action" not in plan.fault_actions


TARGET_CASES: dict[str, tuple[Breaker, str]] = {
    "fault-disguised-as-probe-in-hypothesis": (
        lambda e: e["steady-state-hypothesis"]["probes"].append(
            {**_action(e), "type": "probe", "tolerance": True}
        ),
        "steady-state-hypothesis probe 'kill-all-target-region-replicas' (kill_region_replicas): a fault may run "
        "only in the method, where its rollback is required",
    ),
    "fault-in-rollbacks": (
        lambda e: e["rollbacks"].append(_action(e)),
        "rollbacks action 'kill-all-target-region-replicas' (kill_region_replicas): a fault may run only in the "
        "method, where its rollback is required",
    ),
    "rollback-of-another-track": (
        lambda e: e["rollbacks"][0]["provider"]["arguments"].update(track="canary"),
        "method fault 'kill-all-target-region-replicas' (kill_region_replicas) has no rollback that undoes it: "
        "add a rollbacks entry calling drctl.chaos.actions.clear_faults on region 'us-west-1' track 'stable'",
    ),
    "no-region": (
        lambda e: _action(e)["provider"]["arguments"].update(region=None),
        "method action 'kill-all-target-region-replicas' names no region",
    ),
    "unknown-region": (
        lambda e: _action(e)["provider"]["arguments"].update(region="mars-1"),
        "method action 'kill-all-target-region-replicas': unknown region 'mars-1'; known: us-west-1, us-east-1",
    ),
    "rollback-unknown-region": (
        lambda e: e["rollbacks"][0]["provider"]["arguments"].update(region="eu-1"),
        "rollbacks action 'clear-target-region-faults': unknown region 'eu-1'; known: us-west-1, us-east-1",
    ),
}


BROKEN = {**SHAPE_CASES, **TARGET_CASES}
assert len(BROKEN) == len(SHAPE_CASES) + len(TARGET_CASES), "a case name is used twice"


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_shape_or_fault_target_error_is_refused_with_its_message(
    case: str, cfg: FleetConfig, tmp_path: Path
) -> None:
    fn, message = BROKEN[case]
    assert _refusal(_write(tmp_path, f"{case}.json", _broken(fn)), cfg) == message


def test_the_allow_list_is_checked_per_action_and_for_the_target(unit_dir: Path, tmp_path: Path) -> None:
    east_only = write_drill_config(unit_dir, allowed=["us-east-1"], name="east-only.yaml")
    nobody = write_drill_config(unit_dir, allowed=[], name="nobody.yaml")
    outage = _write(tmp_path, "outage.json", shipped_experiment())
    assert _refusal(outage, east_only) == (
        "method action 'kill-all-target-region-replicas': region 'us-west-1' is not an allowed drill target "
        "(allowed: us-east-1)"
    )
    assert _refusal(outage, nobody) == (
        "method action 'kill-all-target-region-replicas': region 'us-west-1' is not an allowed drill target "
        "(allowed: none)"
    )
    # The fault aims at an allowed region, but the experiment's own target is not one.
    aimed = _broken(
        lambda e: [
            a["provider"]["arguments"].update(region="us-east-1")
            for a in e["method"] + e["rollbacks"]
            if "region" in a["provider"].get("arguments", {})
        ]
    )
    assert _refusal(_write(tmp_path, "aimed.json", aimed), east_only) == (
        "method action 'kill-all-target-region-replicas' (kill_region_replicas) aims at region 'us-east-1', but "
        "the drill declares target_region 'us-west-1': every fault and rollback must act on the declared target"
    )
    # Aimed at the allowed region with --target, it passes.
    assert v.validate_experiment(outage, east_only, target="us-east-1").target_region == "us-east-1"


def test_the_refusal_lists_every_allowed_target(tmp_path: Path) -> None:
    data = fleet_config_data()
    third = copy.deepcopy(data["regions"][1])
    third.update(
        name="eu-west-1", weight=0, gateway_url="http://127.0.0.1:1", devstack_admin_url="http://127.0.0.1:1"
    )
    third["gateway_runtime_socket"] = "s/haproxy/eu-west-1.sock"
    third["kube"] = {"api_url": "http://127.0.0.1:2"}  # a region of its own: no two share an API
    data["regions"].append(third)
    data["drills"] = {"allowed_targets": ["us-east-1", "eu-west-1"], "fault_injector": "devstack"}
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump(data))
    assert _refusal(_write(tmp_path, "outage.json", shipped_experiment()), load_config(path)) == (
        "method action 'kill-all-target-region-replicas': region 'us-west-1' is not an allowed drill target "
        "(allowed: us-east-1, eu-west-1)"
    )


def test_devstack_only_faults_need_the_devstack_injector(unit_dir: Path, tmp_path: Path) -> None:
    kube = write_drill_config(unit_dir, injector="kubernetes", name="kube.yaml")
    path = _write(tmp_path, "gateway-loss.json", shipped_experiment("gateway-loss"))
    assert _refusal(path, kube, target="us-east-1") == (
        "method action 'kill-target-region-gateway': kill_gateway needs drills.fault_injector devstack"
    )
    degrade = _write(tmp_path, "degradation.json", shipped_experiment("region-degradation"))
    assert _refusal(degrade, kube, target="us-east-1").endswith(
        ": degrade_region needs drills.fault_injector devstack"
    )
    # The same faults pass with the dev-stack injector, and outages pass with either.
    assert v.validate_experiment(
        path, write_drill_config(unit_dir, name="ds.yaml"), target="us-east-1"
    ).expect_failover
    assert v.validate_experiment(_write(tmp_path, "o.json", shipped_experiment()), kube, target="us-east-1")


def test_boundary_violations_are_refused_before_anything_is_imported(
    cfg: FleetConfig, tmp_path: Path
) -> None:
    foreign = _broken(
        lambda e: e["steady-state-hypothesis"]["probes"].append(
            {"type": "probe", "name": "sh", "provider": {"type": "process", "path": "sh"}}
        )
    )
    assert _refusal(_write(tmp_path, "process.json", foreign), cfg) == (
        "steady-state-hypothesis.probes[1] 'sh': provider type 'process' is not allowed in a drill "
        "(only python and http)"
    )
    secret_env = _broken(
        lambda e: e["configuration"].update(token={"type": "env", "key": "AWS_SECRET_ACCESS_KEY"})
    )
    assert _refusal(_write(tmp_path, "env.json", secret_env), cfg).startswith(
        "configuration.token: may not read environment variable 'AWS_SECRET_ACCESS_KEY'"
    )
    assert _refusal(_write(tmp_path, "../units-evil..name.json", shipped_experiment()), cfg) == (
        "name 'units-evil..name' is not allowed: use letters, digits, '.', '_' and '-' only"
    )


def test_read_and_syntax_errors_name_the_line(cfg: FleetConfig, tmp_path: Path) -> None:
    assert _refusal(tmp_path / "absent.json", cfg) == "cannot read: No such file or directory"
    assert _refusal(_write(tmp_path, "bad.json", '{"title": "x",\n  "method": ['), cfg) == (
        "JSON syntax error at line 2 column 14: Expecting value"
    )
    assert _refusal(_write(tmp_path, "bad.yaml", "title: x\nmethod: [unclosed\n  - {"), cfg) == (
        "YAML syntax error at line 3: did not find expected ',' or ']'"
    )
    assert _refusal(_write(tmp_path, "bad.yml", "a: b\n\tc: d\n"), cfg) == (
        "YAML syntax error at line 2: found a tab character that violates indentation"
    )
    assert _refusal(_write(tmp_path, "list.json", "[1, 2]"), cfg) == (
        "an experiment must be a mapping of keys (title, method, ...)"
    )
    assert _refusal(_write(tmp_path, "list.yaml", "- 1\n- 2\n"), cfg) == (
        "an experiment must be a mapping of keys (title, method, ...)"
    )


def test_documents_chaoslib_or_json_cannot_handle_are_refused(cfg: FleetConfig, tmp_path: Path) -> None:
    # A reader error has no line mark: the message says what, without a line.
    assert _refusal(_write(tmp_path, "ctl.yaml", "title: x\x07\n"), cfg) == (
        "YAML syntax error: unacceptable character #x0007: control characters are not allowed\n"
        '  in "<unicode string>", position 8'
    )
    # A bare reference in the method is refused before chaoslib (which would crash on it) sees it.
    ref = shipped_experiment()
    ref["method"].append("look")
    assert _refusal(_write(tmp_path, "ref.json", ref), cfg) == (
        "method: each activity must be a mapping written out in full (references are not allowed), not 'look'"
    )
    # YAML reads a date; the canonical text that runs is JSON, which has none.
    dated = shipped_experiment()
    dated["extensions"][0]["when"] = "DATE"
    text = yaml.safe_dump(dated).replace("when: DATE", "when: 2026-01-01")
    assert _refusal(_write(tmp_path, "dated.yaml", text), cfg) == (
        "not representable as a JSON experiment: Object of type date is not JSON serializable"
    )


def test_yaml_experiments_are_read_as_yaml(cfg: FleetConfig, tmp_path: Path) -> None:
    import yaml

    for suffix in (".yaml", ".yml"):
        path = tmp_path / f"outage{suffix}"
        path.write_text(yaml.safe_dump(shipped_experiment()))
        plan = v.validate_experiment(path, cfg, target="us-east-1")
        assert plan.name == "outage" and plan.fmt == "json" and plan.target_region == "us-east-1"


def test_chaostoolkit_validation_and_configuration_errors(cfg: FleetConfig, tmp_path: Path) -> None:
    logging.getLogger("chaostoolkit").setLevel(logging.NOTSET)  # whatever an earlier validation left
    bad_tolerance = _broken(
        lambda e: e["steady-state-hypothesis"]["probes"][0].update(tolerance={"type": "range", "range": [1]})
    )
    assert _refusal(_write(tmp_path, "tol.json", bad_tolerance), cfg) == (
        "not a valid Chaos Toolkit experiment: hypothesis range sequence must be made of two values"
    )
    # chaoslib's own progress logging is quieted: a validation speaks only when something is wrong.
    assert logging.getLogger("chaostoolkit").level == logging.WARNING
    unset = _broken(lambda e: e["configuration"].update(knob={"type": "env", "key": "DRCTL_KNOB"}))
    assert _refusal(_write(tmp_path, "unset.json", unset), cfg).startswith(
        "configuration.knob: may not read environment variable 'DRCTL_KNOB'"
    )


def test_a_valid_experiment_yields_the_plan_that_runs(cfg: FleetConfig, tmp_path: Path) -> None:
    exp = shipped_experiment()
    exp["method"].append(
        {
            "type": "probe",
            "name": "look",
            "provider": {"type": "python", "module": "drctl.chaos.probes", "func": "global_success_ratio"},
        }
    )
    path = _write(tmp_path, "outage.json", exp)
    plan = v.validate_experiment(path, cfg, target="us-east-1")
    conf = {
        "fleet_config": str(Path(cfg.source_path or "").resolve()),
        "global_endpoint": cfg.traffic.global_endpoint,
        "target_region": "us-east-1",
        "rto_target_s": cfg.objectives.rto_target_s,
    }
    assert plan.configuration == conf
    assert plan.path == str(path.resolve()) and plan.name == "outage"
    assert plan.title == exp["title"] and plan.fmt == "json"
    assert plan.text == canonical(exp, conf) and plan.sha256 == digest(plan.text)
    assert plan.target_region == "us-east-1" and plan.expect_failover is True
    assert plan.fault_actions == ["kill-all-target-region-replicas"]
    assert plan.probes == [
        "global-endpoint-serves-completions",
        "traffic-served-elsewhere-within-rto",
        "look",
    ]
    assert plan.rollbacks == ["clear-target-region-faults"]
    # The fleet's RTO target replaces the experiment's default.
    slow = tuned(cfg, "objectives", rto_target_s=45.0)
    assert v.validate_experiment(path, slow).configuration["rto_target_s"] == 45.0
    # Without --target the experiment's own default stands; a config without a file path passes "".
    assert v.validate_experiment(path, cfg).target_region == "us-west-1"
    no_source = cfg.model_copy(update={"source_path": None})
    assert v.validate_experiment(path, no_source).configuration["fleet_config"] == ""
    replica = v.validate_experiment(_write(tmp_path, "r.json", shipped_experiment("replica-loss")), cfg)
    assert replica.expect_failover is False


def test_check_imports_names_the_module_and_function() -> None:
    def exp(module: str, func: str) -> dict[str, Any]:
        return {
            "method": [
                {
                    "type": "action",
                    "name": "a",
                    "provider": {"type": "python", "module": module, "func": func},
                }
            ]
        }

    with pytest.raises(v.ExperimentInvalid) as info:
        v._check_imports("p", exp("drctl.chaos.nope", "f"))
    assert str(info.value).startswith(
        "p: method 'a': cannot import module 'drctl.chaos.nope': No module named"
    )
    with pytest.raises(v.ExperimentInvalid) as info:
        v._check_imports("p", exp("drctl.chaos.actions", "explode"))
    assert str(info.value) == "p: method 'a': module 'drctl.chaos.actions' has no function 'explode'"
    with pytest.raises(v.ExperimentInvalid) as info:
        v._check_imports("p", exp("drctl.chaos.actions", "CONFIG_ENV"))  # imported, but not callable
    assert str(info.value) == "p: method 'a': module 'drctl.chaos.actions' has no function 'CONFIG_ENV'"
    # http providers and references are not imported, and do not end the check.
    mixed = {
        "method": [
            {"name": "h", "provider": {"type": "http", "module": "nope"}},
            "ref",
            {"name": "b", "provider": {"type": "python", "module": "drctl.chaos.actions", "func": "nope"}},
        ]
    }
    with pytest.raises(v.ExperimentInvalid) as info:
        v._check_imports("p", mixed)
    assert str(info.value) == "p: method 'b': module 'drctl.chaos.actions' has no function 'nope'"


def test_guarded_turns_library_crashes_into_refusals() -> None:
    def boom() -> None:
        raise TypeError("unhashable")

    with pytest.raises(v.ExperimentInvalid) as info:
        v._guarded("p", "Chaos Toolkit validation", boom)
    assert str(info.value) == "p: Chaos Toolkit validation: malformed experiment (TypeError: unhashable)"
    assert info.value.__cause__ is None and info.value.__suppress_context__
    own = v.ExperimentInvalid("p", "mine")
    violation = BoundaryViolation("edge")
    for exc in (own, violation):

        def reraise(exc: Exception = exc) -> None:
            raise exc

        with pytest.raises(type(exc)) as got:
            v._guarded("p", "step", reraise)
        assert got.value is exc
    assert v._guarded("p", "step", lambda: 42) == 42


def test_activities_lists_every_section_in_order() -> None:
    exp = {
        "steady-state-hypothesis": {"probes": [{"n": 1}, "ref"]},
        "method": [{"n": 2}],
        "rollbacks": [{"n": 3}, 4],
    }
    assert v._activities(exp) == [
        ("steady-state-hypothesis", {"n": 1}),
        ("method", {"n": 2}),
        ("rollbacks", {"n": 3}),
    ]
    assert v._activities({"steady-state-hypothesis": None, "method": None}) == []
    assert v._drctl_extension({"extensions": ["x", {"name": "other"}, {"name": "drctl", "a": 1}]}) == {
        "name": "drctl",
        "a": 1,
    }
    assert v._drctl_extension({"extensions": None}) == {}


def test_pauses_are_numbers_from_zero_to_the_drill_timeout(cfg: FleetConfig, tmp_path: Path) -> None:
    short = tuned(cfg, "drills", timeout_s=250)

    def paused(pauses: Any, where: str = "method") -> Path:
        exp = shipped_experiment()
        exp[where][0]["pauses"] = pauses
        return _write(tmp_path, "paused.json", exp)

    for ok in ({"before": 0}, {"after": 0.5}, {"before": 1, "after": 2}, {}):
        v.validate_experiment(paused(ok), short)
    v.validate_experiment(paused({"before": 30}, "rollbacks"), short)
    for bad in ({"before": -0.01}, {"before": 250.01}, {"before": True}, {"before": None}):
        assert _refusal(paused(bad), short) == (
            "method 'kill-all-target-region-replicas': pause before must be 0..250 seconds (drills.timeout_s)"
        ), bad
    # Pauses that are not a mapping are chaoslib's to refuse, as a refusal rather than a crash.
    assert _refusal(paused(5), short) == (
        "Chaos Toolkit validation: malformed experiment (AttributeError: 'int' object has no attribute 'get')"
    )
    # Within the drill's timeout, but not within the time budget: named by the budget instead.
    assert _refusal(paused({"after": 250}), short).startswith(
        "method[0].pauses.after: the experiment may take 422s"
    )


def test_the_document_rules_apply_to_json_and_yaml_alike(cfg: FleetConfig, tmp_path: Path) -> None:
    long_title = shipped_experiment()
    long_title["title"] = "t" * 16_385
    assert _refusal(_write(tmp_path, "long.json", long_title), cfg) == (
        "title: a value longer than 16,384 characters (16,385)"
    )
    long_title["title"] = "t" * 16_384
    assert v.validate_experiment(_write(tmp_path, "edge.json", long_title), cfg).title == "t" * 200
    huge = shipped_experiment()
    huge["tags"] = [2**53 + 1]
    assert (
        _refusal(_write(tmp_path, "huge.json", huge), cfg) == "tags[0]: an integer beyond ±2^53 (16 digits)"
    )
    text = yaml.safe_dump(shipped_experiment()) + "x-a: &a 1\nx-b: *a\n"
    assert _refusal(_write(tmp_path, "alias.yaml", text), cfg).startswith(
        f"line {text.count(chr(10))}: YAML alias *a is not allowed in an experiment"
    )
    on_yes = yaml.safe_dump(shipped_experiment()) + "on: 1\n"
    assert _refusal(_write(tmp_path, "on.yaml", on_yes), cfg).startswith("(top level): key True is not text")
    dup = "title: a\ntitle: b\n"
    assert _refusal(_write(tmp_path, "dup.yaml", dup), cfg) == (
        "duplicate key 'title' (first at line 1, again at line 2) at line 2"
    )


def test_unknown_top_level_keys_are_named_sorted_and_short(cfg: FleetConfig, tmp_path: Path) -> None:
    exp = shipped_experiment()
    exp["runtime"] = {"rollbacks": {"strategy": "never"}}
    exp["z" * 60] = 1
    assert _refusal(_write(tmp_path, "top.json", exp), cfg) == (
        f"top-level key(s) not allowed in a drill: runtime, {'z' * 40} (drctl sets the run's strategy)"
    )
    for key in ("version", "tags", "contributions"):
        ok = shipped_experiment()
        ok[key] = ok.get(key) or ({"reliability": "high"} if key == "contributions" else ["x"])
        v.validate_experiment(_write(tmp_path, "ok.json", ok), cfg)


def test_the_declared_target_is_the_env_entrys_default_or_the_plain_value(cfg: FleetConfig) -> None:
    assert (
        v._declared_target({"configuration": {"target_region": {"type": "env", "default": "e"}}}, None) == "e"
    )
    assert v._declared_target({"configuration": {"target_region": "w"}}, None) == "w"
    assert v._declared_target({"configuration": {"target_region": "w"}}, "given") == "given"
    assert v._default("kill_replicas", "count") == 1 and v._default("clear_faults", "track") == "stable"
    assert (
        v._default("kill_region_replicas", "region") is None and v._default("kill_gateway", "track") is None
    )


def test_argument_types_are_refused_through_the_validation(cfg: FleetConfig, tmp_path: Path) -> None:
    exp = shipped_experiment("replica-loss")
    exp["method"][0]["provider"]["arguments"]["count"] = 1.5
    assert _refusal(_write(tmp_path, "typed.json", exp), cfg) == (
        "method[0].provider.arguments.count: must be an integer, not 1.5"
    )
    exp["method"][0]["provider"]["arguments"]["count"] = 2
    v.validate_experiment(_write(tmp_path, "typed.json", exp), cfg)
