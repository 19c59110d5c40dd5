"""The drill boundary: what an experiment may make the worker do.

`chaos run` executes on the worker, which holds cluster and AWS credentials, so an experiment is
code. Every provider anywhere in the document (steady-state hypothesis, method, rollbacks, dynamic
configuration, extensions, ...) must be a python function of drctl's own chaos modules, or an HTTP
probe to one of the fleet's own endpoints. `process` providers, controls and secrets never pass,
and configuration may read only the environment keys drctl documents (drctl/chaos/__init__.py).

The experiment that runs is the canonical text made here: configuration resolved to plain values,
so nothing is read or executed at run time that was not checked at validation.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import re
from collections.abc import Iterator
from typing import Any

from drctl.chaos import CONFIG_ENV
from drctl.config.schema import FleetConfig
from drctl.config.urls import Origin, UrlRefused, origin, parse_http_url

ACTIONS_MODULE = "drctl.chaos.actions"
PROBES_MODULE = "drctl.chaos.probes"
ALLOWED_MODULES = (ACTIONS_MODULE, PROBES_MODULE)
# What an HTTP provider runs: chaoslib's own follows redirects and cannot be told not to (as_run).
HTTP_PROBE = "http_request"
# The keys chaoslib's http provider reads; it ignores any other (allow_redirects, follow_redirects),
# so an experiment asking for one would not get what it says.
_HTTP_KEYS = frozenset(
    {"type", "url", "method", "headers", "timeout", "arguments", "verify_tls", "max_retries"}
)
# The actions that undo faults; every other action is a fault (see role()).
ROLLBACK_FUNCS = frozenset({"clear_faults"})
# What an allowed env entry reads as to the checks: its value is not known until `chaos run`.
ENV_SENTINEL = "\x00drctl-env\x00"
_ENV_ENTRY_KEYS = {"type", "key", "default", "env_var_type"}
# Keys chaoslib reads as code or credentials, wherever they appear.
_FORBIDDEN_KEYS = {
    "controls": "controls load arbitrary python modules",
    "secrets": "secrets read credentials from the environment or a vault",
}
# chaoslib fills these itself; given as arguments they would replace the checked configuration.
_RESERVED_ARGS = ("configuration", "secrets")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class BoundaryViolation(ValueError):
    """An experiment reaches outside what a drill may do. The message says where and what."""


def _walk(node: Any, where: str) -> Iterator[tuple[str, Any]]:
    yield where, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, f"{where}.{k}" if where else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{where}[{i}]")


def allowed_functions(module: str) -> set[str]:
    """Public functions defined in `module` itself (not ones it imports, such as `fleet`)."""
    mod = importlib.import_module(module)
    return {
        n
        for n, f in vars(mod).items()
        if inspect.isfunction(f) and not n.startswith("_") and f.__module__ == module
    }


def fleet_origins(cfg: FleetConfig) -> set[Origin]:
    """scheme, host, port of every endpoint the fleet config names for clients: global and gateways."""
    return {
        origin(parse_http_url(u))
        for u in [cfg.traffic.global_endpoint, *(r.gateway_url for r in cfg.regions)]
    }


def role(provider: dict[str, Any]) -> str:
    """What a provider does, judged by the function it calls, never by its activity's `type`.

    Every public function of the actions module is a fault except the rollback ones, so a new
    action is judged a fault until it is named here.
    """
    if provider.get("type") == "python" and provider.get("module") == ACTIONS_MODULE:
        return "rollback" if provider.get("func") in ROLLBACK_FUNCS else "fault"
    return "probe"


def _check_python(where: str, provider: dict[str, Any]) -> None:
    module, func = provider.get("module"), provider.get("func")
    if module not in ALLOWED_MODULES:
        raise BoundaryViolation(
            f"{where}: python module {module!r} is not allowed; drills run only {', '.join(ALLOWED_MODULES)}"
        )
    if not isinstance(func, str) or func not in allowed_functions(module):
        # Quoted unless a plain name: the value comes from the experiment and may hold control characters.
        shown = func if isinstance(func, str) and func.isidentifier() else repr(func)
        raise BoundaryViolation(f"{where}: {module}.{shown} is not one of drctl's drill functions")
    args = provider.get("arguments") or {}
    if not isinstance(args, dict):
        raise BoundaryViolation(f"{where}: arguments must be a mapping")
    for name in _RESERVED_ARGS:
        if name in args:
            raise BoundaryViolation(
                f"{where}: argument {name!r} is reserved (chaoslib passes the checked one)"
            )


def _mentions_env(value: Any) -> bool:
    """Whether ENV_SENTINEL is in any string of `value`. Not by searching its JSON text: json writes
    the sentinel's NUL bytes as \\u0000, so that search never found it."""
    if isinstance(value, str):
        return ENV_SENTINEL in value
    if isinstance(value, dict):
        return any(_mentions_env(k) or _mentions_env(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_mentions_env(v) for v in value)
    return False


def resolved(where: str, value: Any, conf: dict[str, Any]) -> Any:
    """`value` after chaoslib's `${...}` substitution, refusing one that depends on the run's env."""
    from chaoslib import substitute

    out = substitute(value, conf, {})
    if _mentions_env(out):
        raise BoundaryViolation(
            f"{where}: a checked value may not come from an environment variable (it is not known "
            "until the run); write the value, or use ${target_region}"
        )
    return out


def http_url(where: str, provider: dict[str, Any], conf: dict[str, Any], cfg: FleetConfig) -> str:
    """The URL an http provider will request, re-serialised, if it is one of the fleet's endpoints."""
    url = resolved(where, provider.get("url"), conf)
    try:
        parsed = parse_http_url(url)
    except UrlRefused as exc:
        raise BoundaryViolation(f"{where}: HTTP provider url refused: {exc}") from None
    seen = origin(parsed)
    if seen not in fleet_origins(cfg):
        shown = f"{seen.scheme}://{seen.host}:{seen.port}"  # the origin only: a query may hold a secret
        raise BoundaryViolation(
            f"{where}: HTTP provider url {shown!r} is not the fleet's global endpoint or a region gateway"
        )
    method = str(provider.get("method", "GET")).upper()
    if method not in ("GET", "HEAD"):
        raise BoundaryViolation(f"{where}: an HTTP probe may only GET or HEAD, not {method[:20]!r}")
    if provider.get("verify_tls", True) is not True:
        raise BoundaryViolation(f"{where}: an HTTP probe may not turn off TLS verification")
    retries, timeout = provider.get("max_retries", 0), provider.get("timeout", 5)
    if not (type(retries) is int and 0 <= retries <= 3):
        raise BoundaryViolation(f"{where}: max_retries must be an integer 0..3")
    if not (type(timeout) in (int, float) and 0 < timeout <= 60):
        raise BoundaryViolation(f"{where}: timeout must be a number of seconds in (0, 60]")
    return str(parsed)


def _is_http_probe(provider: dict[str, Any]) -> bool:
    return (
        provider.get("type") == "python"
        and provider.get("module") == PROBES_MODULE
        and provider.get("func") == HTTP_PROBE
    )


def http_view(provider: dict[str, Any]) -> dict[str, Any]:
    """An http provider, or a python call of the HTTP probe, as the keys `http_url` checks."""
    if provider.get("type") == "http":
        return provider
    args = provider.get("arguments") or {}
    return {
        "url": args.get("url"),
        "method": args.get("method", "GET"),
        "timeout": args.get("timeout", 5),
        "max_retries": args.get("max_retries", 0),
    }


def as_run(
    where: str, provider: dict[str, Any], conf: dict[str, Any], cfg: FleetConfig
) -> dict[str, Any] | None:
    """What runs for an HTTP provider or a call of the HTTP probe, or None for any other provider.

    chaoslib's http provider (1.44) calls `requests.Session.request` without `allow_redirects`, whose
    default is True, and reads no key that changes it: a fleet URL could answer 302 to a host the
    check refuses, and the worker would follow. So an http provider runs as drctl's
    `probes.http_request`, which never follows a redirect, on the checked and re-serialised URL.
    """
    if not (provider.get("type") == "http" or _is_http_probe(provider)):
        return None
    url = http_url(where, http_view(provider), conf, cfg)
    if provider.get("type") != "http":
        return {**provider, "arguments": {**provider["arguments"], "url": url}}
    args: dict[str, Any] = {
        "url": url,
        "method": str(provider.get("method", "GET")).upper(),
        "timeout": provider.get("timeout", 5),
        "max_retries": provider.get("max_retries", 0),
    }
    for key, name in (("headers", "headers"), ("arguments", "params")):
        if provider.get(key) is not None:
            args[name] = provider[key]
    return {"type": "python", "module": PROBES_MODULE, "func": HTTP_PROBE, "arguments": args}


def _check_provider(where: str, provider: Any, conf: dict[str, Any], cfg: FleetConfig) -> None:
    if not isinstance(provider, dict):
        raise BoundaryViolation(f"{where}: provider must be a mapping")
    kind = provider.get("type")
    if kind == "python":
        _check_python(where, provider)
        if _is_http_probe(provider):
            http_url(where, http_view(provider), conf, cfg)
    elif kind == "http":
        extra = sorted(str(k)[:40] for k in provider.keys() - _HTTP_KEYS)
        if extra:
            raise BoundaryViolation(
                f"{where}: unknown HTTP provider key(s) {', '.join(map(repr, extra))}: Chaos Toolkit ignores "
                "them, and a drill's HTTP probe never follows a redirect"
            )
        http_url(where, provider, conf, cfg)
    else:
        raise BoundaryViolation(
            f"{where}: provider type {kind!r} is not allowed in a drill (only python and http)"
        )


def _env_allowed(name: str, env_key: Any, cfg: FleetConfig) -> bool:
    """drctl's own keys (whose values drctl supplies), or a name the fleet config allows."""
    if CONFIG_ENV.get(name) == env_key:
        return True
    return isinstance(env_key, str) and env_key in cfg.drills.allowed_env


def _check_configuration(exp: dict[str, Any], cfg: FleetConfig) -> None:
    configuration = exp.get("configuration") or {}
    if not isinstance(configuration, dict):
        raise BoundaryViolation("configuration must be a mapping")
    allowed = ", ".join(cfg.drills.allowed_env) or "none"
    for key, value in configuration.items():
        if not isinstance(key, str) or not _SAFE_NAME.fullmatch(key):
            raise BoundaryViolation(f"configuration key {str(key)[:40]!r} is not a plain name")
        if not (isinstance(value, dict) and "type" in value):
            continue
        if value.get("type") != "env":
            raise BoundaryViolation(
                f"configuration.{key}: dynamic configuration of type {value.get('type')!r} is not allowed in a drill"
            )
        extra = sorted(set(value) - _ENV_ENTRY_KEYS)
        if extra:
            raise BoundaryViolation(f"configuration.{key}: unknown env entry keys: {', '.join(extra)}")
        if not _env_allowed(key, value.get("key"), cfg):
            raise BoundaryViolation(
                f"configuration.{key}: may not read environment variable {value.get('key')!r}; a drill reads "
                f"only drctl's own {', '.join(f'{k}<-{v}' for k, v in CONFIG_ENV.items())} (values drctl "
                f"supplies) and the names in the fleet's drills.allowed_env ({allowed})"
            )


def configuration_for(
    exp: dict[str, Any], drctl_values: dict[str, Any], cfg: FleetConfig
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what runs, what the checks substitute): drctl's keys get drctl's values whatever the file
    says; an allowed env entry stays an env entry (read by `chaos run` from its scrubbed env, never
    here) and reads as ENV_SENTINEL to the checks; any other value is taken as written."""
    _check_configuration(exp, cfg)
    run: dict[str, Any] = {}
    check: dict[str, Any] = {}
    for key, value in (exp.get("configuration") or {}).items():
        if key in drctl_values:
            continue
        if isinstance(value, dict) and value.get("type") == "env":
            if key in CONFIG_ENV:
                run[key] = check[key] = value.get("default")
                continue
            run[key] = {k: value[k] for k in sorted(value)}
            check[key] = ENV_SENTINEL
        else:
            run[key] = check[key] = value
    for key, value in drctl_values.items():
        run[key] = check[key] = value
    return run, check


def _activity_positions(exp: dict[str, Any]) -> dict[str, int]:
    """Where an activity may stand: its path and the object there. By path as well as object: a YAML
    alias makes one object stand in two places, and only one of them may be an activity's."""
    hypo = exp.get("steady-state-hypothesis")
    probes = hypo.get("probes") if isinstance(hypo, dict) else None
    sections = [("steady-state-hypothesis.probes", probes)]
    sections += [(key, exp.get(key)) for key in ("method", "rollbacks")]
    return {
        f"{where}[{i}]": id(a)
        for where, acts in sections
        if isinstance(acts, list)
        for i, a in enumerate(acts)
        if isinstance(a, dict)
    }


def check_boundary(
    exp: dict[str, Any], conf: dict[str, Any], cfg: FleetConfig, configuration_only: bool = False
) -> None:
    """Raise BoundaryViolation for anything in `exp` a drill must not run, wherever it sits.

    `configuration_only` checks just what resolving the configuration would read, so that can be
    done before the rest (HTTP URLs are checked after `${...}` substitution). A provider is allowed
    only in an activity of the hypothesis, method or rollbacks: chaoslib also runs providers in
    tolerances, dynamic configuration and controls, and none of those is checked as an activity.
    """
    _check_configuration(exp, cfg)
    if configuration_only:
        return
    positions = _activity_positions(exp)
    for where, node in _walk(exp, ""):
        if not isinstance(node, dict):
            continue
        for key, why in _FORBIDDEN_KEYS.items():
            if key in node:
                raise BoundaryViolation(
                    f"{where + '.' if where else ''}{key}: not allowed in a drill ({why})"
                )
        if "provider" in node:
            _check_provider(f"{where} '{node.get('name')}'", node["provider"], conf, cfg)
            if positions.get(where) != id(node):
                raise BoundaryViolation(
                    f"{where}: a provider is allowed only in an activity of the steady-state hypothesis, "
                    "method or rollbacks (not in a tolerance, configuration or extension)"
                )
        if node.get("type") == "process":
            raise BoundaryViolation(f"{where}: process providers are never allowed in a drill")
        if "ref" in node and positions.get(where) == id(node):
            raise BoundaryViolation(f"{where}: activity references are not allowed; write the activity out")


def safe_name(name: str) -> str:
    """A name used in a file or object path: refuse anything that could leave its directory."""
    # fullmatch: `$` in match() would let a trailing newline through into a file name.
    if not _SAFE_NAME.fullmatch(name) or ".." in name:
        raise BoundaryViolation(f"name {name!r} is not allowed: use letters, digits, '.', '_' and '-' only")
    return name


def canonical(exp: dict[str, Any], conf: dict[str, Any]) -> str:
    """The text that runs: `exp` with its configuration replaced by the resolved plain values."""
    try:
        return json.dumps({**exp, "configuration": conf}, indent=1, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise BoundaryViolation(f"not representable as a JSON experiment: {exc}") from None


def digest(text: str) -> str:
    # surrogatepass: a text with a lone surrogate (not UTF-8) gets a digest, then the loader refuses it.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
