"""Bearer credentials for the inference servers (vLLM started with `--api-key`).

The config names where the token lives (`workload.auth.token_env` or `token_file`); the value is
read here, at request time, by the activity or provider that sends the request. It is never put
in a workflow input or a result, and error messages name the source, never the value. Reading at
request time (not once at worker start) lets a rotated Secret file take effect without a restart.
"""

from __future__ import annotations

import os
from pathlib import Path

from drctl.config.bounded_read import read_regular_text
from drctl.config.schema import FleetConfig, WorkloadAuth

# A bearer token is a line; 64 KiB is far more than any, and bounds what a wrong path can cost.
MAX_TOKEN_BYTES = 64 << 10


class AuthConfigError(RuntimeError):
    """The configured token source cannot be read; the message names it, never a value."""


def bearer_token(auth: WorkloadAuth | None) -> str | None:
    """The token from the configured env var or file; None when the fleet has no auth configured."""
    if auth is None:
        return None
    if auth.token_env:
        value = os.environ.get(auth.token_env, "").strip()
        if not value:
            raise AuthConfigError(
                f"workload.auth.token_env: environment variable {auth.token_env} is unset or empty"
            )
        return value
    path = Path(auth.token_file or "")
    try:
        value = read_regular_text(path, max_bytes=MAX_TOKEN_BYTES, what="workload.auth.token_file").strip()
    except OSError as exc:  # FileRefused: not a regular file, too large, unreadable
        raise AuthConfigError(f"workload.auth.token_file: cannot read {path}: {exc.strerror}") from None
    if not value:
        raise AuthConfigError(f"workload.auth.token_file: {path} is empty")
    return value


def auth_headers(cfg: FleetConfig) -> dict[str, str]:
    """`Authorization: Bearer …` for the fleet's inference API, or no header without auth."""
    token = bearer_token(cfg.workload.auth)
    return {"Authorization": f"Bearer {token}"} if token else {}
