"""Phase bookkeeping for the Temporal UI (search attribute, details, timings), shared by every operation.

Activity timeouts and retry policies live in `workflows.calls`."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from drctl.models import search_attributes as sa
    from drctl.models.phases import OperationProgress, PhaseTiming
    from drctl.models.safe_text import safe_markdown

# One value's share of the Temporal UI's details: a reason longer than this is cut, and says so.
DETAIL_CHARS = 1000


class Phases:
    """Phase bookkeeping: DrctlPhase search attribute, current-details markdown, logs, timings."""

    def __init__(self, operation: str, title: str) -> None:
        self.operation = operation
        self.title = title
        self.phase = "pending"
        self.details = ""
        self.timings: list[PhaseTiming] = []
        self.facts: dict[str, str] = {}
        self.awaiting_approval = False

    def enter(self, phase: str, details: str = "") -> None:
        now = workflow.now()
        self._close(now)
        self.timings.append(PhaseTiming(phase=phase, started_at=now))
        self.phase = phase
        self.details = details
        workflow.upsert_search_attributes([sa.PHASE.value_set(phase)])
        workflow.logger.info("%s: phase %s %s", self.operation, phase, details)
        self._render()

    def note(self, key: str, value: str) -> None:
        self.facts[key] = value
        self._render()

    def finish(self, phase: str, details: str = "") -> None:
        now = workflow.now()
        self._close(now)
        self.phase = phase
        self.details = details
        workflow.upsert_search_attributes([sa.PHASE.value_set(phase)])
        workflow.logger.info("%s: %s %s", self.operation, phase, details)
        self._render()

    def _close(self, now: Any) -> None:
        if self.timings and self.timings[-1].ended_at is None:
            last = self.timings[-1]
            last.ended_at = now
            last.duration_s = round((now - last.started_at).total_seconds(), 3)

    def _render(self) -> None:
        # The UI renders markdown; titles, details and facts quote reasons from servers and names
        # from configs, so each is one escaped, bounded line that cannot link, embed or break the table.
        lines = [f"## {safe_markdown(self.title, limit=DETAIL_CHARS)}", f"**Phase:** `{self.phase}`"]
        if self.details:
            lines.append(f"\n{safe_markdown(self.details, limit=DETAIL_CHARS)}")
        if self.facts:
            lines.append("\n| | |\n|---|---|")
            lines += [
                f"| {safe_markdown(k, limit=DETAIL_CHARS)} | {safe_markdown(v, limit=DETAIL_CHARS)} |"
                for k, v in self.facts.items()
            ]
        if self.timings:
            lines.append("\n| phase | seconds |\n|---|---|")
            lines += [
                f"| {t.phase} | {t.duration_s if t.duration_s is not None else '…'} |" for t in self.timings
            ]
        workflow.set_current_details("\n".join(lines))

    def progress(self) -> OperationProgress:
        return OperationProgress(
            operation=self.operation,
            phase=self.phase,
            details=self.details,
            awaiting_approval=self.awaiting_approval,
            phases=list(self.timings),
        )


def fmt_weights(w: dict[str, int]) -> str:
    return " / ".join(f"{k} {v}" for k, v in w.items())
