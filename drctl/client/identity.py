"""Who is acting: the identity drctl records on every operation it starts, approves or rejects.

The same string is the Temporal client's `identity` (shown on the history events the client
causes), the operation's `initiator` memo and its `DrctlInitiator` search attribute.

Where it comes from, first match wins:
1. `DRCTL_IDENTITY`: set per person or per pipeline (e.g. your SSO e-mail, or `ci@deploy-bot`);
2. `temporal.identity` in the fleet config: e.g. the principal of the API key the config names;
3. the OS user and host, `user@host`.

Temporal Cloud knows which principal an API key or certificate belongs to, but a client cannot
read it back, so with an API key set 1 or 2 to the key's principal.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Mapping

from drctl.config.schema import FleetConfig

ENV = "DRCTL_IDENTITY"
MAX_LEN = 200  # a Keyword search attribute holds more; an identity this long is a mistake


class IdentityError(ValueError):
    """DRCTL_IDENTITY or temporal.identity is not a usable identity (exit 2)."""


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no USER/LOGNAME and no passwd entry (a container's random UID)
        return f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"


def _host() -> str:
    try:
        return socket.gethostname() or "unknown-host"
    except OSError:
        return "unknown-host"


def os_identity() -> str:
    """`user@host` of this process, whatever the environment lacks."""
    return f"{_os_user()}@{_host()}"


def worker_identity() -> str:
    """A worker's client identity, as the SDK would choose it: `pid@host`."""
    return f"{os.getpid()}@{_host()}"


def checked(value: str, where: str) -> str:
    """`value` stripped, or IdentityError naming `where` when it cannot be recorded as is."""
    v = value.strip()
    if not v:
        raise IdentityError(f"{where}: the identity is empty")
    if len(v) > MAX_LEN:
        raise IdentityError(f"{where}: the identity is {len(v)} characters long (at most {MAX_LEN})")
    if any(not c.isprintable() for c in v):
        raise IdentityError(f"{where}: the identity contains control characters")
    return v


def identity(cfg: FleetConfig | None = None, env: Mapping[str, str] | None = None) -> str:
    """The acting identity: DRCTL_IDENTITY, else temporal.identity, else user@host."""
    env = os.environ if env is None else env
    if env.get(ENV, "").strip():
        return checked(env[ENV], ENV)
    if cfg is not None and cfg.temporal.identity:
        return checked(cfg.temporal.identity, "temporal.identity")
    return os_identity()
