"""A failover that holds on purpose: `drctl status` reports it as the fleet's state, not a problem.

After a failover the global weights differ from the config's, and they should: someone (an operator,
or the monitor) moved the traffic and it stays there until a failback. `drctl status` tells this from
a drift nobody asked for by the fleet's latest finished traffic operation in Temporal: a failover
that completed, whose drained regions are still at weight 0 and whose target still serves, is
"failed over" (exit 0), with who did it, when, and the command that fails back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalio.client import Client

    from drctl.config.schema import FleetConfig


def closed_traffic_query(fleet: str) -> str:
    """The fleet's finished failovers and failbacks (newest first, as Temporal lists them)."""
    return (
        f"DrctlFleet = '{fleet}' AND ExecutionStatus != 'Running' "
        "AND DrctlOperation IN ('failover', 'failback')"
    )


async def last_traffic_operation(client: Client, cfg: FleetConfig) -> dict[str, Any] | None:
    """The fleet's latest finished failover or failback, as plain data; None when there is none."""
    from drctl.client.operations import operation_info

    async for ex in client.list_workflows(closed_traffic_query(cfg.name), limit=1):
        info = operation_info(ex, cfg.name, cfg)
        return info.model_dump(mode="json") | {"close_time": ex.close_time}
    return None


def failed_over(now: dict[str, Any], last: dict[str, Any] | None, fail_back: str) -> dict[str, Any] | None:
    """The failover the weights `now` show, when the latest traffic operation was one that completed.

    Its drained regions (its source, or every other region) must be at weight 0 and its target above
    it: weights that moved since (by hand, or half a failback) are still a drift. `fail_back` is the
    command line that returns the fleet to its configured weights.
    """
    if not last or last.get("operation") != "failover" or last.get("status") != "COMPLETED":
        return None
    target = last.get("target")
    if target not in now:
        return None
    drained = [last["source"]] if last.get("source") else [n for n in now if n != target]
    if not (now[target] or 0) > 0 or any(now.get(n) != 0 for n in drained):
        return None
    return {
        "target": target,
        "workflow_id": last.get("workflow_id"),
        "by": last.get("initiator") or "unknown",
        "since": str(last.get("close_time") or last.get("start_time") or ""),
        "ui_link": last.get("ui_link"),
        "fail_back": fail_back,
    }
