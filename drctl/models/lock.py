"""The per-fleet lock (`lock/<fleet>`): who may run beside whom, and what preempts what.

Pure rules, free of Temporal, so the lock workflow, the CLI's early check and the tests all judge
a request the same way. The table in docs/lock.md ("Who may run beside whom") is this module.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

# Operations that take the lock. A backup changes no workload, so it takes none and runs beside any.
MUTATING = ("failover", "failback", "upgrade", "migrate", "drill", "restore", "rebalance")
# Maintenance: planned work that yields to disaster recovery.
MAINTENANCE = frozenset({"upgrade", "migrate", "restore"})

# A drill exists to cause a failover (and the failback after it), so those run beside it; a drill of
# a slow region causes a rebalance instead.
_COMPATIBLE = {
    frozenset({"drill", "failover"}),
    frozenset({"drill", "failback"}),
    frozenset({"drill", "rebalance"}),
}
# A rebalance is a partial, reversible traffic move: a failover outranks it as it outranks maintenance.
# So does a failback: it returns share to a region step by step, and a region failing meanwhile (the
# one the failback takes share from, or the one it gives it to) is answered at once by a failover,
# never after the failback has finished stepping onto it.
_YIELDS_TO_FAILOVER = MAINTENANCE | {"rebalance", "failback"}

# Update, signal and query names of the FleetLock workflow, and the signal a preempted holder gets.
UPDATE_ACQUIRE = "acquire"
SIGNAL_RELEASE = "release"
QUERY_HOLDERS = "holders"
SIGNAL_PREEMPT = "preempt"


def lock_id(fleet: str) -> str:
    return f"lock/{fleet}"


def compatible(a: str, b: str) -> bool:
    return frozenset({a, b}) in _COMPATIBLE


def preempts(requester: str, holder: str) -> bool:
    """DR first: a failover is never refused because maintenance, a rebalance or a failback holds the
    fleet; it preempts them."""
    return requester == "failover" and holder in _YIELDS_TO_FAILOVER


def blocks(holder: str, requester: str) -> bool:
    """Whether a live holder makes `requester` wait (it is then refused as busy)."""
    return not compatible(holder, requester) and not preempts(requester, holder)


class Holder(BaseModel):
    """One operation holding (or asking for) the fleet."""

    workflow_id: str
    run_id: str
    operation: str
    since: datetime | None = None
    # Set once a failover preempted this maintenance holder: it is rolling back or stopping, and
    # still holds the fleet against other maintenance until it releases.
    yielding_to: str | None = None


class LockRequest(BaseModel):
    fleet: str
    holder: Holder


class LockGrant(BaseModel):
    granted: bool
    # When refused: the live holder that blocks the request.
    blocked_by: Holder | None = None
    blocked_by_ui: str | None = None
    # Maintenance holders told to yield to this request.
    preempted: list[Holder] = Field(default_factory=list)
    # Compatible holders running beside this one (a drill beside its failover).
    beside: list[Holder] = Field(default_factory=list)
    # Holders found closed (crashed, terminated) and evicted while judging this request.
    evicted: list[Holder] = Field(default_factory=list)


class LockRelease(BaseModel):
    workflow_id: str
    run_id: str


class PreemptNotice(BaseModel):
    """Sent by the lock to a holder that yields (maintenance, rebalance, failback) when a failover
    takes the fleet."""

    by_workflow_id: str
    by_operation: str
    reason: str


class LockState(BaseModel):
    fleet: str
    holders: list[Holder] = Field(default_factory=list)


class LockInput(BaseModel):
    fleet: str
    # Carried across continue-as-new.
    holders: list[Holder] = Field(default_factory=list)


class AliveInput(BaseModel):
    holders: list[Holder]


class AliveResult(BaseModel):
    # (workflow_id, run_id) of holders whose run is closed or gone.
    closed: list[Holder] = Field(default_factory=list)
