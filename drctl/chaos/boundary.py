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
from urllib.parse import urlsplit

from drctl.chaos import CONFIG_ENV
from drctl.config.schema import FleetConfig

ALLOWED_MODULES = ("drctl.chaos.actions", "drctl.chaos.probes")
# Keys chaoslib reads as code or credentials, wherever they appear.
_FORBIDDEN_KEYS = {
    "controls": "controls load arbitrary python modules",
    "secrets": "secrets read credentials from the environment or a vault",
}
# chaoslib fills these itself; given as arguments they would replace the checked configuration.
_RESERVED_ARGS = ("configuration", "secrets")
_CREDENTIAL = re.compile(r"key|token|secret|passw|credential|auth", re.IGNORECASE)
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


def fleet_origins(cfg: FleetConfig) -> set[tuple[str, str, int | None]]:
    """scheme, host, port of every endpoint the fleet config names for clients: global and gateways."""
    return {_origin(u) for u in [cfg.traffic.global_endpoint, *(r.gateway_url for r in cfg.regions)]}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), port if port is not None else default


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


def _check_http(where: str, provider: dict[str, Any], conf: dict[str, Any], cfg: FleetConfig) -> None:
    from chaoslib import substitute

    url = substitute(provider.get("url"), conf, {})
    if not isinstance(url, str) or _origin(url) not in fleet_origins(cfg):
        raise BoundaryViolation(
            f"{where}: HTTP provider url {url!r} is not the fleet's global endpoint or a region gateway"
        )


def _check_provider(where: str, provider: Any, conf: dict[str, Any], cfg: FleetConfig) -> None:
    if not isinstance(provider, dict):
        raise BoundaryViolation(f"{where}: provider must be a mapping")
    kind = provider.get("type")
    if kind == "python":
        _check_python(where, provider)
    elif kind == "http":
        _check_http(where, provider, conf, cfg)
    else:
        raise BoundaryViolation(
            f"{where}: provider type {kind!r} is not allowed in a drill (only python and http)"
        )


def _env_allowed(name: str, env_key: Any) -> bool:
    """drctl's documented keys, or DRCTL_<NAME> for a knob `name`; never a credential-like name."""
    if CONFIG_ENV.get(name) == env_key:
        return True
    return env_key == f"DRCTL_{name.upper()}" and not _CREDENTIAL.search(name)


def _check_configuration(exp: dict[str, Any]) -> None:
    for key, value in (exp.get("configuration") or {}).items():
        if not (isinstance(value, dict) and "type" in value):
            continue
        if value.get("type") != "env":
            raise BoundaryViolation(
                f"configuration.{key}: dynamic configuration of type {value.get('type')!r} is not allowed in a drill"
            )
        if not _env_allowed(key, value.get("key")):
            raise BoundaryViolation(
                f"configuration.{key}: may not read environment variable {value.get('key')!r}; a drill reads only "
                f"{', '.join(f'{k}<-{v}' for k, v in CONFIG_ENV.items())} and <name><-DRCTL_<NAME> (no secrets)"
            )


def check_boundary(
    exp: dict[str, Any], conf: dict[str, Any], cfg: FleetConfig, configuration_only: bool = False
) -> None:
    """Raise BoundaryViolation for anything in `exp` a drill must not run, wherever it sits.

    `configuration_only` checks just what resolving the configuration would read, so that can be
    done before the rest (HTTP URLs are checked after `${...}` substitution).
    """
    _check_configuration(exp)
    if configuration_only:
        return
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
        if node.get("type") == "process":
            raise BoundaryViolation(f"{where}: process providers are never allowed in a drill")


def safe_name(name: str) -> str:
    """A name used in a file or object path: refuse anything that could leave its directory."""
    # fullmatch: `$` in match() would let a trailing newline through into a file name.
    if not _SAFE_NAME.fullmatch(name) or ".." in name:
        raise BoundaryViolation(f"name {name!r} is not allowed: use letters, digits, '.', '_' and '-' only")
    return name


def canonical(exp: dict[str, Any], conf: dict[str, Any]) -> str:
    """The text that runs: `exp` with its configuration replaced by the resolved plain values."""
    try:
        return json.dumps({**exp, "configuration": conf}, indent=1, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise BoundaryViolation(f"not representable as a JSON experiment: {exc}") from None


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
