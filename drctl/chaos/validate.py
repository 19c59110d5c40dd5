"""Validate a drill experiment before anything runs, with an error a user can act on.

One judgement, made the same way by the CLI and by the worker just before `chaos run`:
- the file is read within limits (size, depth, alias expansion, UTF-8; drctl.config.safeload);
- the keys a drill needs are there with the right shapes, and activity references are refused;
- nothing crosses the drill boundary (boundary.py: only drctl's chaos functions and HTTP probes to
  the fleet's endpoints, anywhere in the document; this runs before anything is imported), and the
  configuration reads no environment the fleet config does not allow (`drills.allowed_env`);
- chaostoolkit-lib's own `ensure_experiment_is_valid` accepts it;
- every provider is judged by the function it calls, not by its `type`: a fault may run only in the
  method, must aim at the drill's declared target_region (allow-listed, and one the configured
  injector can hurt), and must have a rollback that clears the same region and track.
The plan carries the canonical text (drctl's configuration values filled in, URLs re-serialised)
and its sha256: that text is what the worker checks again and runs.
"""

from __future__ import annotations

import copy
import importlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from drctl.chaos.activity_checks import CallRefused, check_calls
from drctl.chaos.boundary import (
    ACTIONS_MODULE,
    BoundaryViolation,
    as_run,
    canonical,
    check_boundary,
    configuration_for,
    digest,
    resolved,
    role,
    safe_name,
)
from drctl.chaos.document import DocumentRefused, check_document, check_yaml_references
from drctl.config.safeload import DocumentError, Limits, load_json, load_yaml, read_bounded
from drctl.config.schema import TRACKS, FleetConfig
from drctl.models.drill import ExperimentPlan

T = TypeVar("T")
_TOP_LEVEL = {
    "version",
    "title",
    "description",
    "tags",
    "contributions",
    "extensions",
    "configuration",
    "steady-state-hypothesis",
    "method",
    "rollbacks",
}
# An experiment is a page of JSON (the shipped ones are about 3 KB): 256 KiB and 50,000 values are far
# beyond any real one, and keep the worst case a refusal can cost (a document just under every limit,
# broken on its last line) to a small fraction of a second.
EXPERIMENT_LIMITS = Limits(max_bytes=256 << 10, max_depth=32, max_nodes=50_000, max_scalar=16_384)
# Faults the Kubernetes injector cannot produce (docs: scale to 0, delete pods only).
_DEVSTACK_ONLY = {"degrade_region", "kill_gateway", "stop_temporal", "stop_worker"}


class ExperimentInvalid(ValueError):
    """An experiment file a drill must not run. The message names the file and the problem."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def _parse(path: Path) -> tuple[Any, str]:
    try:
        data = read_bounded(path, EXPERIMENT_LIMITS, what="experiment")  # drctl.config.bounded_read
    except OSError as exc:
        raise ExperimentInvalid(str(path), f"cannot read: {exc.strerror}") from None
    except DocumentError as exc:
        raise ExperimentInvalid(str(path), str(exc)) from None
    yaml_file = path.suffix in (".yaml", ".yml")
    try:
        # libyaml's parser (fast): PyYAML's pure-Python scanner spends about 1 s of CPU on 1 MiB.
        doc = (
            load_yaml(data, EXPERIMENT_LIMITS, fast=True) if yaml_file else load_json(data, EXPERIMENT_LIMITS)
        )
    except DocumentError as exc:
        where = f" at line {exc.line}" if exc.line else ""
        message = exc.message
        if message.startswith("YAML syntax error"):
            message = f"YAML syntax error{where}:{message.removeprefix('YAML syntax error')[1:]}"
        elif where:
            message = f"{message}{where}"
        raise ExperimentInvalid(str(path), message) from None
    text = data.decode()
    try:
        # The same rules for YAML and JSON, and so for the worker, which is handed JSON.
        check_document(doc)
        if yaml_file:
            check_yaml_references(text)
    except DocumentRefused as exc:
        raise ExperimentInvalid(str(path), str(exc)) from None
    return doc, text


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
        if not isinstance(act, dict):
            raise ExperimentInvalid(
                path,
                f"{where}: each activity must be a mapping written out in full (references are not "
                f"allowed), not {str(act)[:60]!r}",
            )
        if isinstance(act, dict) and not isinstance(act.get("provider"), dict | None):
            raise ExperimentInvalid(
                path, f"{where} '{act.get('name')}': provider must be a mapping, not {act['provider']!r}"
            )
    if not isinstance(exp["method"], list) or not exp["method"]:
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


def _default(func: str, arg: str) -> Any:
    import inspect

    from drctl.chaos import actions

    param = inspect.signature(getattr(actions, func)).parameters.get(arg)
    return None if param is None or param.default is inspect.Parameter.empty else param.default


def _check_pauses(path: str, where: str, act: dict[str, Any], conf: dict[str, Any], cfg: FleetConfig) -> None:
    try:
        pauses = resolved(f"{where} '{act.get('name')}' pauses", act.get("pauses") or {}, conf)
    except BoundaryViolation as exc:
        raise ExperimentInvalid(path, str(exc)) from None
    for key, value in pauses.items() if isinstance(pauses, dict) else [("pauses", pauses)]:
        if type(value) not in (int, float) or not 0 <= value <= cfg.drills.timeout_s:
            raise ExperimentInvalid(
                path,
                f"{where} '{act.get('name')}': pause {key} must be 0..{cfg.drills.timeout_s:g} seconds "
                "(drills.timeout_s)",
            )


def _check_targets(path: str, exp: dict[str, Any], conf: dict[str, Any], cfg: FleetConfig) -> None:
    """Every fault in the method, at the declared target, with a rollback of the same region and track."""
    target = conf.get("target_region")
    faults: list[tuple[str, str, str, Any]] = []
    undone: set[tuple[str, Any]] = set()
    for where, act in _activities(exp):
        _check_pauses(path, where, act, conf, cfg)
        provider = act.get("provider") or {}
        kind = role(provider)
        if kind == "probe":
            continue
        name, func = act.get("name"), str(provider.get("func"))
        label = f"{where} {act.get('type')} '{name}' ({func})"
        if kind == "fault" and where != "method":
            raise ExperimentInvalid(
                path, f"{label}: a fault may run only in the method, where its rollback is required"
            )
        try:
            args = resolved(label, provider.get("arguments") or {}, conf)
        except BoundaryViolation as exc:
            raise ExperimentInvalid(path, str(exc)) from None
        region = args.get("region")
        if region is None:
            raise ExperimentInvalid(path, f"{where} action '{name}' names no region")
        if region not in cfg.region_names:
            raise ExperimentInvalid(
                path,
                f"{where} action '{name}': unknown region {region!r}; known: {', '.join(cfg.region_names)}",
            )
        if region not in cfg.drills.allowed_targets:
            allowed = ", ".join(cfg.drills.allowed_targets) or "none"
            raise ExperimentInvalid(
                path,
                f"{where} action '{name}': region {region!r} is not an allowed drill target "
                f"(allowed: {allowed})",
            )
        if region != target:
            raise ExperimentInvalid(
                path,
                f"{label} aims at region {region!r}, but the drill declares target_region {target!r}: "
                "every fault and rollback must act on the declared target",
            )
        if func in _DEVSTACK_ONLY and cfg.drills.fault_injector != "devstack":
            raise ExperimentInvalid(
                path, f"{where} action '{name}': {func} needs drills.fault_injector devstack"
            )
        track = args.get("track", _default(func, "track"))
        if track is not None and track not in TRACKS:
            raise ExperimentInvalid(
                path, f"{label}: track {str(track)[:40]!r} is not one of {', '.join(TRACKS)}"
            )
        if kind == "fault":
            faults.append((str(name), func, region, track))
        elif where == "rollbacks":
            undone.add((region, track))
    for name, func, region, track in faults:
        if not any(r == region and (track is None or t == track) for r, t in undone):
            what = f"region {region!r}" + (f" track {track!r}" if track is not None else "")
            raise ExperimentInvalid(
                path,
                f"method fault '{name}' ({func}) has no rollback that undoes it: add a rollbacks entry "
                f"calling {ACTIONS_MODULE}.clear_faults on {what}",
            )


def _canonical_doc(
    exp: dict[str, Any], run_conf: dict[str, Any], check_conf: dict[str, Any], cfg: FleetConfig
) -> dict[str, Any]:
    """What runs: drctl's configuration, and every HTTP probe as drctl's own (which never follows a
    redirect) on its URL in the form that was checked (boundary.as_run)."""
    doc = copy.deepcopy(exp)
    for where, act in _activities(doc):
        provider = act.get("provider")
        if isinstance(provider, dict) and (
            run := as_run(f"{where} '{act.get('name')}'", provider, check_conf, cfg)
        ):
            act["provider"] = run
    return {**doc, "configuration": run_conf}


def _guarded(path: str, step: str, fn: Callable[[], T]) -> T:
    """Run one validation step; chaoslib answers some malformed documents with a bare TypeError or
    AttributeError, which must reach the user as a refusal naming the step, not as a traceback."""
    try:
        return fn()
    except (ExperimentInvalid, BoundaryViolation, CallRefused):
        raise
    except Exception as exc:  # noqa: BLE001 - see above
        raise ExperimentInvalid(path, f"{step}: malformed experiment ({type(exc).__name__}: {exc})") from None


def _declared_target(exp: dict[str, Any], target: str | None) -> str:
    if target:
        return target
    value = exp["configuration"].get("target_region")
    if isinstance(value, dict):  # drctl's env entry: its default, never the environment
        value = value.get("default")
    return str(value)


def validate_experiment(path: str | Path, cfg: FleetConfig, target: str | None = None) -> ExperimentPlan:
    """Validate `path` for a drill on `cfg`, optionally aimed at `target`; raise ExperimentInvalid."""
    p = Path(path)
    exp, _ = _parse(p)
    name = str(p)
    if not isinstance(exp, dict):
        raise ExperimentInvalid(name, "an experiment must be a mapping of keys (title, method, ...)")
    _required(name, exp)
    target_region = _declared_target(exp, target)
    drctl_values: dict[str, Any] = {
        "fleet_config": str(Path(cfg.source_path).resolve()) if cfg.source_path else "",
        "global_endpoint": cfg.traffic.global_endpoint,
        "rto_target_s": cfg.objectives.rto_target_s,
        "target_region": target_region,
    }
    try:
        safe_name(p.stem)
        run_conf, conf = configuration_for(exp, drctl_values, cfg)
        # Nothing is imported before this check: an import can run code.
        _guarded(name, "drill boundary", lambda: check_boundary(exp, conf, cfg))
    except BoundaryViolation as exc:
        raise ExperimentInvalid(name, str(exc)) from None
    # chaoslib reads more top-level keys than a drill needs: `runtime` sets the rollback and hypothesis
    # strategies (never roll back, probe continuously at any frequency) over drctl's own choice.
    unknown = sorted(str(k)[:40] for k in exp if k not in _TOP_LEVEL)
    if unknown:
        raise ExperimentInvalid(
            name,
            f"top-level key(s) not allowed in a drill: {', '.join(unknown)} (drctl sets the run's strategy)",
        )
    # Judged by the function called, after the boundary has said every function is one of drctl's.
    if not any(role(a.get("provider") or {}) == "fault" for a in exp["method"]):
        raise ExperimentInvalid(name, "method needs at least one fault action")
    _check_imports(name, exp)
    _guarded(name, "Chaos Toolkit validation", lambda: _chaoslib_valid(name, {**exp, "configuration": conf}))
    _guarded(name, "fault targets", lambda: _check_targets(name, exp, conf, cfg))
    try:
        _guarded(name, "activity arguments", lambda: check_calls(exp, conf, cfg))
    except CallRefused as exc:
        raise ExperimentInvalid(name, str(exc)) from None
    if target_region not in cfg.drills.allowed_targets:
        raise ExperimentInvalid(name, f"target_region {target_region!r} is not an allowed drill target")
    method = exp["method"]
    try:
        text = canonical(_canonical_doc(exp, run_conf, conf, cfg), run_conf)
    except BoundaryViolation as exc:
        raise ExperimentInvalid(name, str(exc)) from None
    acts = [a for a in method if isinstance(a, dict)]
    hypo = [a for a in exp["steady-state-hypothesis"]["probes"] if isinstance(a, dict)]
    return ExperimentPlan(
        path=str(p.resolve()),
        name=p.stem,
        title=str(exp["title"])[:200],
        text=text,
        sha256=digest(text),
        fmt="json",
        target_region=target_region,
        expect_failover=bool(_drctl_extension(exp)["expect_failover"]),
        fault_actions=[str(a.get("name")) for a in acts if role(a.get("provider") or {}) == "fault"],
        probes=[str(a.get("name")) for a in hypo]
        + [str(a.get("name")) for a in acts if role(a.get("provider") or {}) == "probe"],
        rollbacks=[str(a.get("name")) for a in exp.get("rollbacks") or [] if isinstance(a, dict)],
        configuration=run_conf,
    )
