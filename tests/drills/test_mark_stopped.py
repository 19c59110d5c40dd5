"""What an ABORTED report says about a stopped experiment, for each way the stop can end."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from drctl.models.drill import DrillReport, ExperimentOutcome, JournalVerdict, Verdict, mark_stopped
from tests.support.builders import drill_report

NOW = datetime.now(UTC)


def _report() -> DrillReport:
    return drill_report(
        NOW, id="drill/test/1", fleet="test", experiment="region-outage", title="t", target_region="us-west-1"
    )


@pytest.mark.parametrize(
    ("exit_code", "journal", "verdict", "says"),
    [
        (None, {}, JournalVerdict(), "stopped before `chaos run` started: nothing was injected"),
        (-9, {}, JournalVerdict(fault_injected=True), "whether its rollbacks ran is unknown"),
        (
            1,
            {"status": "interrupted"},
            JournalVerdict(fault_injected=True, rollbacks_expected=1, rollbacks_failed=["clear"]),
            "rollbacks incomplete (0/1 succeeded; clear)",
        ),
        (
            1,
            {"status": "interrupted"},
            JournalVerdict(fault_injected=True, rollbacks_expected=1, rollbacks_ok=1),
            "its 1 rollback(s) succeeded",
        ),
    ],
)
def test_stopped_report_says_whether_the_fault_was_undone(
    exit_code: int | None, journal: dict[str, str], verdict: JournalVerdict, says: str
) -> None:
    out = ExperimentOutcome(
        exit_code=exit_code, verdict=verdict, journal=journal, started_at=NOW, ended_at=NOW, cancelled=True
    )
    report = _report()
    mark_stopped(report, out, "drill window closed (by ops)")
    assert report.verdict is Verdict.ABORTED
    assert report.reasons[0] == "aborted during the experiment: drill window closed (by ops)"
    assert says in report.reasons[1], report.reasons
    assert report.fault_injected is verdict.fault_injected
