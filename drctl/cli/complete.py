"""Shell completion of values: region names from the fleet config, operation IDs from Temporal.

A completion runs on every <TAB>, so each one is bounded (Temporal gets one second) and never
raises: a config that does not load or a Temporal that does not answer completes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TEMPORAL_BUDGET_S = 1.0


def _config_path(ctx: Any) -> Path:
    """The file the command would load: -c, else --fleet, env, context, default (contexts.resolve)."""
    from drctl.cli.contexts import resolve

    given = (ctx.params or {}).get("config") if ctx is not None else None
    root = ctx.find_root() if ctx is not None else None
    fleet = (root.params or {}).get("fleet") if root is not None else None
    return resolve(Path(given) if given else None, fleet).path


def regions(ctx: Any, incomplete: str) -> list[str]:
    """Region names of the fleet named by -c / DRCTL_CONFIG, read without validating the whole file."""
    import yaml  # here, not at import: every command module imports this one, and -h needs no YAML

    try:
        data = yaml.safe_load(_config_path(ctx).read_text(encoding="utf-8"))
        names = [str(r["name"]) for r in data["regions"]]
    except Exception:  # noqa: BLE001 - a completion completes nothing rather than fail the shell
        return []
    return [n for n in names if n.startswith(incomplete)]


async def _operation_ids(cfg: Any, incomplete: str) -> list[str]:
    from drctl.client.connection import connect
    from drctl.models import search_attributes as sa

    client = await connect(cfg)
    query = f"{sa.FLEET.name} = '{cfg.name}'"
    ids: list[str] = []
    async for ex in client.list_workflows(query, limit=50):
        if ex.id.startswith(incomplete) and ex.id not in ids:
            ids.append(ex.id)
    return ids


def operation_ids(ctx: Any, incomplete: str) -> list[str]:
    """IDs of the fleet's recent workflows (newest first), asked of Temporal within one second."""
    import asyncio

    try:
        # The config and the Temporal client load first: the budget bounds Temporal's answer, not
        # this process's imports (which a loaded machine can take a second over).
        from drctl.client import connection  # noqa: F401 - imported here, outside the budget
        from drctl.config.schema import load_config

        cfg = load_config(_config_path(ctx))
        return asyncio.run(asyncio.wait_for(_operation_ids(cfg, incomplete), TEMPORAL_BUDGET_S))
    except Exception:  # noqa: BLE001 - a completion completes nothing rather than fail the shell
        return []
