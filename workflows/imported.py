"""ImportedOperation (`imported/<fleet>/<time>`): a break-glass failover, recorded once Temporal is back.

`drctl failover-import` starts it with the audit record the break-glass run left. It moves nothing
and calls no activity: it shows the record where operators look (search attributes DrctlOperation
failover and the regions, the phase, the memo, the UI details), tells the fleet's monitor so the
move enters its decision log as adopted, and completes at once.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from drctl.models import phases as phase_names
    from drctl.models import search_attributes as sa
    from drctl.models.breakglass import SIGNAL_IMPORTED, ImportInput, ImportResult
    from workflows.common import Phases, fmt_weights


@workflow.defn(name="ImportedOperation")
class ImportedOperation:
    @workflow.run
    async def run(self, inp: ImportInput) -> ImportResult:
        rec = inp.record
        phases = Phases(
            "failover", f"Break-glass failover of fleet `{rec.fleet}` to `{rec.target}` (imported)"
        )
        for key, value in (
            ("break-glass by", f"{rec.who} from {rec.host}"),
            ("when", f"{rec.started_at:%Y-%m-%d %H:%M:%S} → {rec.finished_at:%H:%M:%S} UTC"),
            ("status then", rec.status + (f": {rec.error}" if rec.error else "")),
            ("Temporal then", rec.temporal),
            ("weights", f"{fmt_weights(rec.weights_before)} → {fmt_weights(rec.weights_after)}"),
            ("target probe", f"{rec.probe.status.value}: {rec.probe.reason}" if rec.probe else "not probed"),
            ("record", inp.uri),
            ("imported by", inp.imported_by),
        ):
            phases.note(key, value)
        told, note = await self._tell_monitor(inp)
        workflow.upsert_memo({"status": "imported", "record": inp.uri, "break_glass_status": rec.status})
        workflow.upsert_search_attributes([sa.VERDICT.value_set("imported")])
        phases.finish(
            phase_names.PHASE_DONE, f"imported: traffic was moved to `{rec.target}` without Temporal"
        )
        return ImportResult(uri=inp.uri, monitor_told=told, note=note)

    async def _tell_monitor(self, inp: ImportInput) -> tuple[bool, str]:
        """The monitor adopts the weights and logs the record; none running is no error."""
        monitor = f"monitor/{inp.record.fleet}"
        try:
            await workflow.get_external_workflow_handle(monitor).signal(SIGNAL_IMPORTED, inp)
        except FailureError as exc:
            return False, f"{monitor} was not told ({exc}); it adopts the weights as it reads them"
        return True, ""


WORKFLOWS = [ImportedOperation]
