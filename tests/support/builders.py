"""Builders for the model objects many tests start from: one place for the fields a test does not
care about, so a test names only what it is about."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from drctl.models.drill import DrillReport, Verdict


def drill_report(at: datetime | None = None, **fields: Any) -> DrillReport:
    """A passed drill report started and finished at `at` (now by default); `fields` override."""
    at = at or datetime.now(UTC)
    base: dict[str, Any] = {
        "id": "drill/t/1",
        "fleet": "t",
        "experiment": "x",
        "title": "x",
        "target_region": "w",
        "verdict": Verdict.PASS,
        "started_at": at,
        "finished_at": at,
        "expect_failover": True,
        "rto_target_s": 30,
    }
    return DrillReport(**{**base, **fields})
