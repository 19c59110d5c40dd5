"""Validate a drill experiment before anything runs, with an error a user can act on.

Checks, in order: the file reads and parses (JSON or YAML, with the line of a syntax error), the
keys a drill needs are there with the right shapes, nothing crosses the drill boundary (boundary.py:
only drctl's chaos functions and HTTP probes to the fleet's endpoints, anywhere in the document; this
runs before anything is imported), every python activity's module and function import,
chaostoolkit-lib's own `ensure_experiment_is_valid` accepts it, and every fault action is one of
drctl's (so its target can be checked) and aims at an allow-listed region the configured injector
can hurt. The plan carries the canonical text (configuration resolved) and its sha256: that text is
what the worker checks again and runs.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from drctl.chaos.boundary import BoundaryViolation, canonical, check_boundary, digest, safe_name
from drctl.config.schema import FleetConfig
from drctl.models.drill import ExperimentPlan

T = TypeVar("T")
ACTIONS_MODULE = "drctl.chaos.actions"
# Faults the Kubernetes injector cannot produce (docs: scale to 0, delete pods only).
_DEVSTACK_ONLY = {"degrade_region", "kill_gateway"}


class ExperimentInvalid(ValueError):
    """An experiment file a drill must not run. The message names the file and the problem."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def _parse(path: Path) -> tuple[Any, str]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ExperimentInvalid(str(path), f"cannot read: {exc.strerror}") from None
    if path.suffix in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text), text
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise ExperimentInvalid(
                str(path), f"YAML syntax error{where}: {getattr(exc, 'problem', exc)}"
            ) from None
    try:
        return json.loads(text), text
    except json.JSONDecodeError as exc:
        raise ExperimentInvalid(
            str(path), f"JSON syntax error at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None


def _activities(exp: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = [
        ("steady-state-hypothesis", a) for a in (exp.get("steady-state-hypothesis") or {}).get("probes") or []
    ]
    found += [("method", a) for a in exp.get("method") or []]
    found += [("rollbacks", a) for a in exp.get("rollbacks") or []]
    return [(where, a) for where, a in found if isinstance(a, dict)]


def _drctl_extension(exp: dict[str, Any]) -> dict[str, Any]:
    for ext in exp.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == "drctl":
            return ext
    return {}


def _required(path: str, exp: dict[str, Any]) -> None:
    missing = [
        k
        for k in ("title", "description", "steady-state-hypothesis", "method", "configuration")
        if k not in exp
    ]
    if missing:
        raise ExperimentInvalid(path, f"missing required key(s): {', '.join(missing)}")
    hypo = exp["steady-state-hypothesis"]
    if not isinstance(hypo, dict) or not hypo.get("probes") or not isinstance(hypo["probes"], list):
        raise ExperimentInvalid(
            path, "steady-state-hypothesis needs a list of at least one probe against the global endpoint"
        )
    for key in ("method", "rollbacks"):
        if not isinstance(exp.get(key), list | None):
            raise ExperimentInvalid(
                path, f"{key} must be a list of activities, not {type(exp[key]).__name__}"
            )
    for where, act in [("steady-state-hypothesis", a) for a in hypo["probes"]] + [
        (k, a) for k in ("method", "rollbacks") for a in exp.get(k) or []
    ]:
        if not isinstance(act, dict | str):
            raise ExperimentInvalid(
                path, f"{where}: each activity must be a mapping (or a reference), not {act!r}"
            )
        if isinstance(act, dict) and not isinstance(act.get("provider"), dict | None):
            raise ExperimentInvalid(
                path, f"{where} '{act.get('name')}': provider must be a mapping, not {act['provider']!r}"
            )
    if not isinstance(exp["method"], list) or not any(
        isinstance(a, dict) and a.get("type") == "action" for a in exp["method"]
    ):
        raise ExperimentInvalid(path, "method needs at least one fault action")
    if not exp.get("rollbacks"):
        raise ExperimentInvalid(path, "rollbacks are required: a drill must undo its fault")
    if not isinstance(exp.get("extensions"), list | None):
        raise ExperimentInvalid(path, "extensions must be a list")
    if not isinstance(exp["configuration"], dict) or "target_region" not in exp["configuration"]:
        raise ExperimentInvalid(path, "configuration must name the target_region")
    ext = _drctl_extension(exp)
    if not isinstance(ext.get("expect_failover"), bool):
        raise ExperimentInvalid(
            path,
            'extensions needs {"name": "drctl", "expect_failover": true|false}: does this fault fail over?',
        )


def _resolve_configuration(path: str, exp: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    from chaoslib.configuration import load_configuration
    from chaoslib.exceptions import ChaosException

    try:
        return dict(load_configuration(exp.get("configuration") or {}, dict(overrides)))
    except ChaosException as exc:
        raise ExperimentInvalid(path, f"configuration: {exc}") from None


def _check_imports(path: str, exp: dict[str, Any]) -> None:
    for where, act in _activities(exp):
        provider = act.get("provider") or {}
        if provider.get("type") != "python":
            continue
        mod_name, func = provider.get("module"), provider.get("func")
        try:
            mod = importlib.import_module(str(mod_name))
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix
            raise ExperimentInvalid(
                path, f"{where} '{act.get('name')}': cannot import module {mod_name!r}: {exc}"
            ) from None
        if not callable(getattr(mod, str(func), None)):
            raise ExperimentInvalid(
                path, f"{where} '{act.get('name')}': module {mod_name!r} has no function {func!r}"
            )


def _chaoslib_valid(path: str, exp: dict[str, Any]) -> None:
    from chaoslib.exceptions import ChaosException
    from chaoslib.experiment import ensure_experiment_is_valid

    # chaoslib logs its progress at INFO; a CLI validation should only speak when something is wrong.
    logging.getLogger("chaostoolkit").setLevel(logging.WARNING)
    try:
        ensure_experiment_is_valid(exp)
    except ChaosException as exc:
        raise ExperimentInvalid(path, f"not a valid Chaos Toolkit experiment: {exc}") from None


def _check_targets(path: str, exp: dict[str, Any], conf: dict[str, Any], cfg: FleetConfig) -> None:
    from chaoslib import substitute

    for where, act in _activities(exp):
        if act.get("type") != "action":
            continue
        provider = act.get("provider") or {}
        if provider.get("type") != "python" or provider.get("module") != ACTIONS_MODULE:
            raise ExperimentInvalid(
                path,
                f"{where} action '{act.get('name')}': drills run only {ACTIONS_MODULE} actions, "
                "whose targets are checked",
            )
        args = substitute(provider.get("arguments") or {}, conf, {})
        region = args.get("region")
        if region is None:
            raise ExperimentInvalid(path, f"{where} action '{act.get('name')}' names no region")
        if region not in cfg.region_names:
            raise ExperimentInvalid(
                path,
                f"{where} action '{act.get('name')}': unknown region {region!r}; known: {', '.join(cfg.region_names)}",
            )
        if region not in cfg.drills.allowed_targets:
            allowed = ", ".join(cfg.drills.allowed_targets) or "none"
            raise ExperimentInvalid(
                path,
                f"{where} action '{act.get('name')}': region {region!r} is not an allowed drill target "
                f"(allowed: {allowed})",
            )
        if provider.get("func") in _DEVSTACK_ONLY and cfg.drills.fault_injector != "devstack":
            raise ExperimentInvalid(
                path,
                f"{where} action '{act.get('name')}': {provider.get('func')} needs drills.fault_injector devstack",
            )


def _guarded(path: str, step: str, fn: Callable[[], T]) -> T:
    """Run one validation step; chaoslib answers some malformed documents with a bare TypeError or
    AttributeError, which must reach the user as a refusal naming the step, not as a traceback."""
    try:
        return fn()
    except (ExperimentInvalid, BoundaryViolation):
        raise
    except Exception as exc:  # noqa: BLE001 - see above
        raise ExperimentInvalid(path, f"{step}: malformed experiment ({type(exc).__name__}: {exc})") from None


def validate_experiment(path: str | Path, cfg: FleetConfig, target: str | None = None) -> ExperimentPlan:
    """Validate `path` for a drill on `cfg`, optionally aimed at `target`; raise ExperimentInvalid."""
    p = Path(path)
    exp, _ = _parse(p)
    name = str(p)
    if not isinstance(exp, dict):
        raise ExperimentInvalid(name, "an experiment must be a mapping of keys (title, method, ...)")
    _required(name, exp)
    overrides: dict[str, Any] = {
        "fleet_config": str(Path(cfg.source_path).resolve()) if cfg.source_path else "",
        "global_endpoint": cfg.traffic.global_endpoint,
        "rto_target_s": cfg.objectives.rto_target_s,
    }
    if target:
        overrides["target_region"] = target
    try:
        safe_name(p.stem)
        check_boundary(exp, {}, cfg, configuration_only=True)
        conf = _guarded(
            name,
            "configuration",
            lambda: _resolve_configuration(
                name, exp, {k: v for k, v in overrides.items() if k in exp["configuration"]}
            ),
        )
        # Nothing is imported before this check: an import can run code.
        _guarded(name, "drill boundary", lambda: check_boundary(exp, conf, cfg))
    except BoundaryViolation as exc:
        raise ExperimentInvalid(name, str(exc)) from None
    _check_imports(name, exp)
    _guarded(name, "Chaos Toolkit validation", lambda: _chaoslib_valid(name, exp))
    _guarded(name, "fault targets", lambda: _check_targets(name, exp, conf, cfg))
    target_region = str(conf.get("target_region"))
    if target_region not in cfg.drills.allowed_targets:
        raise ExperimentInvalid(name, f"target_region {target_region!r} is not an allowed drill target")
    method = exp["method"]
    try:
        text = canonical(exp, conf)
    except BoundaryViolation as exc:
        raise ExperimentInvalid(name, str(exc)) from None
    acts = [a for a in method if isinstance(a, dict)]
    hypo = [a for a in exp["steady-state-hypothesis"]["probes"] if isinstance(a, dict)]
    return ExperimentPlan(
        path=str(p.resolve()),
        name=p.stem,
        title=str(exp["title"]),
        text=text,
        sha256=digest(text),
        fmt="json",
        target_region=target_region,
        expect_failover=bool(_drctl_extension(exp)["expect_failover"]),
        fault_actions=[str(a.get("name")) for a in acts if a.get("type") == "action"],
        probes=[str(a.get("name")) for a in hypo]
        + [str(a.get("name")) for a in acts if a.get("type") == "probe"],
        rollbacks=[str(a.get("name") if isinstance(a, dict) else a) for a in exp.get("rollbacks") or []],
        configuration=conf,
    )
