"""The precedence table of the fleet lock (docs/lock.md, "Who may run beside whom"), as pure rules."""

from __future__ import annotations

import pytest

from drctl.models.lock import MUTATING, blocks, compatible, preempts

# (requested, holding) → "busy" | "preempts" | "beside"; the table of docs/lock.md, row by row.
TABLE = {
    "failover": {
        "failover": "busy",
        "failback": "preempts",
        "upgrade": "preempts",
        "migrate": "preempts",
        "restore": "preempts",
        "drill": "beside",
        "rebalance": "preempts",
    },
    "failback": {
        "failover": "busy",
        "failback": "busy",
        "upgrade": "busy",
        "migrate": "busy",
        "restore": "busy",
        "drill": "beside",
        "rebalance": "busy",
    },
    "upgrade": dict.fromkeys(MUTATING, "busy"),
    "migrate": dict.fromkeys(MUTATING, "busy"),
    "restore": dict.fromkeys(MUTATING, "busy"),
    "drill": {
        "failover": "beside",
        "failback": "beside",
        "upgrade": "busy",
        "migrate": "busy",
        "restore": "busy",
        "drill": "busy",
        "rebalance": "beside",
    },
    # A rebalance waits for every other traffic or maintenance operation; a failover preempts it.
    "rebalance": {**dict.fromkeys(MUTATING, "busy"), "drill": "beside"},
}


@pytest.mark.parametrize(("requested", "holding"), [(r, h) for r in MUTATING for h in MUTATING])
def test_precedence_table(requested: str, holding: str) -> None:
    want = TABLE[requested][holding]
    got = (
        "preempts"
        if preempts(requested, holding)
        else ("beside" if compatible(requested, holding) else "busy")
    )
    assert got == want
    assert blocks(holding, requested) == (want == "busy")


def test_dr_first_no_maintenance_ever_blocks_a_failover() -> None:
    assert not any(
        blocks(holder, "failover")
        for holder in ("upgrade", "migrate", "restore", "drill", "rebalance", "failback")
    )


def test_readme_shows_the_same_table() -> None:
    from tests.support.docs_text import page

    row = (
        "| failover | busy | **preempts** | **preempts** | **preempts** | **preempts** | runs beside "
        "| **preempts** |"
    )
    assert row in page("docs/lock.md")
