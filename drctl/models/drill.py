"""Chaos drill models: workflow and activity I/O, the journal verdict, the report, and the pure
arithmetic that turns load samples and a fault time into a measured RTO and error window.

The arithmetic lives here, free of Temporal, so the workflow, the CLI and unit tests agree on it.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field, ValidationError, ValidatorFunctionWrapHandler, model_validator

from drctl.config.schema import MAX_DRILL_RPS, FleetConfig
from drctl.config.strict import BoundedScalars
from drctl.models.fleet_spec import FleetSpec

OPERATION = "drill"
MAX_ALTERNATIVES = 64  # experiments a drill schedule picks from, beyond its first


class DrillInputInvalid(Exception):
    """A drill's workflow or experiment input outside what the fleet config could produce, e.g. one
    started directly through Temporal. Not a ValueError, so pydantic hands it on as it is, and the
    ChaosDrill workflow lists it in `failure_exception_types`: the workflow fails with this message
    instead of failing its first task over and over while it decodes the input."""


class _CheckedInput(BoundedScalars):
    """A top-level drill input: every number bounded, and a refusal raised as DrillInputInvalid."""

    @model_validator(mode="wrap")
    @classmethod
    def _refused(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            problems = "; ".join(
                ": ".join(
                    [*(str(p) for p in e["loc"][:1] if e["loc"]), e["msg"].removeprefix("Value error, ")]
                )
                for e in exc.errors()[:5]
            )
            raise DrillInputInvalid(f"{cls.__name__} refused: {problems}") from None


def drill_schedule_id(fleet: str, name: str) -> str:
    """The Temporal Schedule id of a fleet's drill schedule (the CLI creates it, the worker reads it)."""
    return f"drill-schedule/{fleet}/{name}"


class Verdict(str, Enum):
    PASS = "PASS"
    FAILED = "FAILED"
    ABORTED = "ABORTED"


class ExperimentPlan(BaseModel):
    """A validated experiment: what it will hurt and what the drill expects to happen."""

    path: str
    name: str = Field(description="File stem, e.g. region-outage; reports group by it.")
    title: str
    text: str = Field(
        description="Canonical experiment (configuration resolved): what the worker checks and runs."
    )
    sha256: str = Field("", description="sha256 of `text`; the worker refuses a text that does not match.")
    fmt: str = Field("json", description="Format of `text`; canonical texts are json.")
    target_region: str
    expect_failover: bool
    fault_actions: list[str] = Field(default_factory=list, description="Method actions, in order.")
    probes: list[str] = Field(default_factory=list)
    rollbacks: list[str] = Field(default_factory=list)
    configuration: dict[str, Any] = Field(default_factory=dict, description="Resolved configuration.")


class DrillInput(_CheckedInput):
    spec: FleetSpec
    plan: ExperimentPlan
    alternatives: list[ExperimentPlan] = Field(
        default_factory=list,
        max_length=MAX_ALTERNATIVES,
        description="Scheduled drills: the run picks one of plan + these at random.",
    )
    rto_target_s: float = Field(gt=0, description="objectives.rto_target_s.")
    load_rps: float = Field(gt=0, le=MAX_DRILL_RPS, description="drills.load_rps.")
    timeout_s: float = Field(gt=0, description="drills.timeout_s.")
    failback_timeout_s: float = Field(
        300.0, gt=0, description="Bound on waiting for the failback to finish (derived from failback)."
    )
    initiator: str = Field("cli", max_length=200)

    @classmethod
    def from_config(
        cls, cfg: FleetConfig, plan: ExperimentPlan, alternatives: list[ExperimentPlan] | None = None
    ) -> DrillInput:
        """A drill of `plan` (or, scheduled, one of plan + alternatives) on the fleet `cfg` describes."""
        fb = cfg.failback
        # Failover + failback stabilisation + steps bound how long the failback may take.
        failback_timeout_s = fb.stabilization_window_s + fb.steps * (fb.step_interval_s + 15) + 60
        return cls(
            spec=FleetSpec.from_config(cfg),
            plan=plan,
            alternatives=alternatives or [],
            rto_target_s=cfg.objectives.rto_target_s,
            load_rps=cfg.drills.load_rps,
            timeout_s=cfg.drills.timeout_s,
            failback_timeout_s=failback_timeout_s,
        )


class LoadSample(BaseModel):
    t: datetime
    ok: bool
    region: str | None = None
    latency_ms: float = 0.0


class JournalVerdict(BaseModel):
    """What a Chaos Toolkit journal really says. Status `completed` alone proves nothing."""

    status: str | None = None
    steady_state_before_met: bool | None = None
    steady_state_after_met: bool | None = None
    deviated: bool = False
    fault_injected: bool = False
    fault_at: datetime | None = Field(None, description="End of the first successful fault action.")
    failed_actions: list[str] = Field(default_factory=list)
    failed_probes: list[str] = Field(default_factory=list)
    rollbacks_expected: int = 0
    rollbacks_ok: int = 0
    rollbacks_failed: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list, description="Every problem found, one line each.")
    aborted: bool = Field(False, description="Nothing was injected because a precondition failed.")

    @property
    def ok(self) -> bool:
        return not self.reasons


class ExperimentRunInput(_CheckedInput):
    plan: ExperimentPlan
    workflow_id: str
    load_rps: float = Field(gt=0, le=MAX_DRILL_RPS)
    timeout_s: float = Field(gt=0)
    warmup_s: float = Field(
        1.0, ge=0, le=60, description="Load before the experiment starts, to see the baseline."
    )
    load_tail_s: float = Field(
        0.0,
        ge=0,
        description="Load kept up after `chaos run` ends: the failover it caused judges SLO restored "
        "under the moved load, which must outlast objectives.slo.window_s.",
    )


class ExperimentOutcome(BaseModel):
    exit_code: int | None
    verdict: JournalVerdict
    journal_key: str | None = None
    journal: dict[str, Any] = Field(default_factory=dict)
    load: list[LoadSample] = Field(default_factory=list)
    started_at: datetime
    ended_at: datetime
    cancelled: bool = False
    log_tail: str = ""


class MonitorCheckInput(BaseModel):
    fleet: str


class MonitorCheck(BaseModel):
    running: bool
    policy: str | None = None
    problems: list[str] = Field(default_factory=list)


class ObserveInput(BaseModel):
    workflow_id: str = Field(description="failover/<fleet> or failback/<fleet>.")
    since: datetime = Field(description="Only a run started at or after this counts.")
    timeout_s: float
    start_if_missing: bool = Field(False, description="Failback only: start it when nobody did.")
    spec: FleetSpec | None = None
    region: str | None = None


class Observation(BaseModel):
    found: bool
    workflow_id: str
    run_id: str | None = None
    status: str | None = Field(None, description="Temporal status: COMPLETED, FAILED, RUNNING, ...")
    started_at: datetime | None = None
    closed_at: datetime | None = None
    result: dict[str, Any] = Field(default_factory=dict)
    started_by_drill: bool = False
    error: str | None = None


class DrillReport(BaseModel):
    id: str = Field(description="The drill's workflow id, drill/<fleet>/<ts>.")
    fleet: str
    experiment: str
    title: str
    target_region: str
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    started_at: datetime
    finished_at: datetime
    fault_injected: bool = False
    fault_at: datetime | None = None
    expect_failover: bool
    measured_rto_s: float | None = Field(None, description="Fault to traffic fully served elsewhere (load).")
    failover_done_after_s: float | None = Field(None, description="Fault to the failover workflow closing.")
    rto_target_s: float
    error_window_s: float = Field(0.0, description="First to last failed user request after the fault.")
    requests: int = 0
    errors: int = 0
    served_by: dict[str, int] = Field(default_factory=dict)
    failover: Observation | None = None
    failover_phases: list[dict[str, Any]] = Field(default_factory=list)
    failover_rto_s: float | None = Field(None, description="The failover workflow's own RTO figure.")
    slo_restored_s: float | None = Field(
        None,
        description="Fault to the failover's target meeting objectives.slo under the moved load, held "
        "for its window (the failover's slo_restored_s).",
    )
    slo_evidence: str | None = Field(
        None, description="The failover's one line on it: the figures that held, or the metric that breached."
    )
    data_loss_s: float | None = Field(
        None,
        description="Data-loss exposure the failover recorded: replication lag of the target at the fault, s.",
    )
    data_loss_objects: int | None = Field(
        None, description="Objects the target lacked when it took the traffic."
    )
    failback: Observation | None = None
    journal: JournalVerdict | None = None
    journal_key: str | None = None
    phases: list[dict[str, Any]] = Field(default_factory=list)


class ReportKey(BaseModel):
    id: str


# --- pure arithmetic ---------------------------------------------------------------------------


class LoadFigures(BaseModel):
    requests: int
    errors: int
    served_by: dict[str, int]
    error_window_s: float
    recovered_at: datetime | None = Field(None, description="Start of the clean streak that ends the load.")


def load_figures(samples: list[LoadSample], fault_at: datetime | None, target: str | None) -> LoadFigures:
    """Error window and recovery time seen by users after the fault.

    A request after the fault is "bad" when it failed or, when `target` is given (a failover is
    expected), was served by the target.
    Recovery is the first sample of the final streak with no bad request; the error window spans
    the first to the last failed request after the fault.
    """
    served: dict[str, int] = {}
    for s in samples:
        if s.ok:
            served[s.region or "?"] = served.get(s.region or "?", 0) + 1
    errors = sum(not s.ok for s in samples)
    after = sorted((s for s in samples if fault_at is None or s.t >= fault_at), key=lambda s: s.t)
    failed = [s.t for s in after if not s.ok]
    window = (failed[-1] - failed[0]).total_seconds() if failed else 0.0
    recovered: datetime | None = None
    if fault_at is not None and after:
        for s in after:
            bad = not s.ok or (target is not None and s.region == target)
            if bad:
                recovered = None
            elif recovered is None:
                recovered = s.t
    return LoadFigures(
        requests=len(samples),
        errors=errors,
        served_by=served,
        error_window_s=round(window, 3),
        recovered_at=recovered,
    )


def mark_stopped(report: DrillReport, out: ExperimentOutcome, why: str) -> None:
    """ABORTED: the experiment was stopped on request; say why, and whether the fault was undone."""
    v = out.verdict
    report.verdict = Verdict.ABORTED
    report.journal, report.journal_key = v, out.journal_key
    report.fault_injected, report.fault_at = v.fault_injected, v.fault_at
    figures = load_figures(out.load, v.fault_at, None)
    report.requests, report.errors, report.served_by = figures.requests, figures.errors, figures.served_by
    report.error_window_s = figures.error_window_s
    report.reasons.append(f"aborted during the experiment: {why}")
    if out.exit_code is None:
        report.reasons.append("stopped before `chaos run` started: nothing was injected")
    elif not out.journal.get("status"):
        report.reasons.append(
            "`chaos run` left no journal, so whether its rollbacks ran is unknown: check the region"
        )
    elif v.rollbacks_failed or v.rollbacks_ok < v.rollbacks_expected:
        failed = ", ".join(v.rollbacks_failed) or "not run"
        report.reasons.append(
            f"rollbacks incomplete ({v.rollbacks_ok}/{v.rollbacks_expected} succeeded; {failed}): check the region"
        )
    else:
        report.reasons.append(
            f"the experiment was interrupted and its {v.rollbacks_ok} rollback(s) succeeded"
        )


class ClearFaultsInput(BaseModel):
    """Clear the drill faults in `region`: the experiment's own rollbacks may not have run."""

    region: str
    workflow_id: str
    reason: str = Field(description="Why the workflow clears: abort, timeout, lost worker.")


class ClearFaultsResult(BaseModel):
    region: str
    cleared: bool
    detail: str = ""
    still_injected: list[str] = Field(
        default_factory=list, description="Faults the region still holds when read back after the clear."
    )
