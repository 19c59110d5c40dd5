"""Fleets by name: contexts in the user's config dir, as kubeconfig contexts and Temporal CLI profiles.

`$XDG_CONFIG_HOME/drctl/config.yaml` (default `~/.config/drctl/config.yaml`) maps a name to a
fleet config file and, optionally, the Temporal address and namespace to reach it at:

    current-context: prod
    contexts:
      prod: {config: /etc/drctl/prod.yaml, temporal_address: temporal.prod:7233}
      dev: {config: /home/me/src/drctl/config/fleet.yaml}

Which fleet config a command uses, first match wins (`resolve`):
1. `-c FILE` or `--fleet NAME` (both at once is an error);
2. `DRCTL_CONFIG=FILE`, then `DRCTL_FLEET=NAME`;
3. the current context (`drctl config use-context NAME`);
4. `$XDG_CONFIG_HOME/drctl/fleet.yaml`, else `config/fleet.yaml` under the working directory (a
   checkout's dev fleet).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drctl.cli.common import UserError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
FIELDS = ("config", "temporal_address", "temporal_namespace")
CHECKOUT_DEFAULT = Path("config/fleet.yaml")
MAX_BYTES = 1 << 20  # a contexts file is a few lines; anything near this is the wrong file


@dataclass(frozen=True)
class Context:
    name: str
    config: Path
    temporal_address: str | None = None
    temporal_namespace: str | None = None


@dataclass(frozen=True)
class Resolved:
    """The fleet config to load, where the choice came from, and the context's Temporal overrides."""

    path: Path
    source: str
    context: Context | None = None


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "drctl"


def contexts_file(env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / "config.yaml"


def _context(path: Path, name: str, raw: Any) -> Context:
    where = f"{path}: contexts.{name}"
    if not NAME.match(name):
        raise UserError(f"{path}: context name {name!r}: letters, digits, '.', '_' and '-' (at most 63)")
    if not isinstance(raw, dict) or not isinstance(raw.get("config"), str) or not raw["config"]:
        raise UserError(f"{where}: needs `config: <fleet config file>`")
    unknown = set(raw) - set(FIELDS)
    if unknown:
        raise UserError(
            f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; known: {', '.join(FIELDS)}"
        )
    for key in FIELDS[1:]:
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise UserError(f"{where}.{key}: a string")
    config = Path(raw["config"]).expanduser()
    return Context(
        name=name,
        # Relative to the contexts file, as kubeconfig resolves its file paths.
        config=config if config.is_absolute() else path.parent / config,
        temporal_address=raw.get("temporal_address"),
        temporal_namespace=raw.get("temporal_namespace"),
    )


def read(path: Path) -> tuple[str | None, dict[str, Context]]:
    """(current context, contexts by name) of the file at `path`; (None, {}) when it does not exist."""
    import yaml

    if not path.exists():
        return None, {}
    if not path.is_file() or path.stat().st_size > MAX_BYTES:
        raise UserError(f"{path}: not a regular file of at most {MAX_BYTES} bytes")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UserError(f"{path}: cannot read contexts: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("contexts", {}), dict):
        raise UserError(f"{path}: expected `contexts:` mapping names to `config: <file>`")
    found = {str(n): _context(path, str(n), raw) for n, raw in (doc.get("contexts") or {}).items()}
    current = doc.get("current-context")
    if current is not None and current not in found:
        raise UserError(
            f"{path}: current-context {current!r} is not among the contexts ({', '.join(found) or 'none'})"
        )
    return current, found


def write(path: Path, current: str | None, contexts: dict[str, Context]) -> None:
    """Replace the file at once (write, then rename), so a reader never sees half of it."""
    import yaml

    doc: dict[str, Any] = {"current-context": current} if current else {}
    doc["contexts"] = {
        c.name: {
            k: (str(v) if isinstance(v, Path) else v) for k in FIELDS if (v := getattr(c, k)) is not None
        }
        for c in contexts.values()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    tmp.replace(path)


def _named(name: str, contexts: dict[str, Context], path: Path, source: str) -> Resolved:
    if name not in contexts:
        known = ", ".join(sorted(contexts)) or "none: add one with `drctl config set-context`"
        raise UserError(f"{source}: no context {name!r} in {path} (known: {known})")
    return Resolved(contexts[name].config, f"context {name} ({source})", contexts[name])


def resolve(flag: Path | None, fleet: str | None, env: Mapping[str, str] | None = None) -> Resolved:
    """The fleet config a command uses: flag, env, context, default (the module's docstring)."""
    env = os.environ if env is None else env
    if flag is not None and fleet:
        raise UserError(f"give -c {flag} or --fleet {fleet}, not both")
    if flag is not None:
        return Resolved(flag, "-c")
    file = contexts_file(env)
    if fleet:
        return _named(fleet, read(file)[1], file, "--fleet")
    if env.get("DRCTL_CONFIG"):
        return Resolved(Path(env["DRCTL_CONFIG"]), "DRCTL_CONFIG")
    if env.get("DRCTL_FLEET"):
        return _named(env["DRCTL_FLEET"], read(file)[1], file, "DRCTL_FLEET")
    current, contexts = read(file)
    if current:
        return _named(current, contexts, file, "current-context")
    user_default = config_dir(env) / "fleet.yaml"
    if user_default.exists() or not CHECKOUT_DEFAULT.exists():
        return Resolved(user_default, "default")
    return Resolved(CHECKOUT_DEFAULT, "default (the checkout's dev fleet)")
