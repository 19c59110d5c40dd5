"""docker-compose.yml's env files, read as Compose reads them (the short and the long form)."""

from __future__ import annotations

from typing import Any


def env_files(services: dict[str, Any]) -> dict[str, bool]:
    """Every env file a service loads -> whether Compose requires it (`required: false` may be absent)."""
    out: dict[str, bool] = {}
    for svc in services.values():
        entries = svc.get("env_file", [])
        for e in [entries] if isinstance(entries, str) else entries:
            path, required = (e, True) if isinstance(e, str) else (e["path"], e.get("required", True))
            out[path] = out.get(path, True) and required is True
    return out
