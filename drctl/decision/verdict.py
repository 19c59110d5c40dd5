"""The one place a region's verdict is decided: facts and memory in, verdict and reason out.

One tick's facts make an observation (`observe`): failed, passed (healthy, degraded or saturated)
or unknown. The hysteresis state machine (`judge_region`) turns the run of observations into the
verdict: DOWN only after `failure_threshold` failed ticks in a row (and the quorum of vantage
points, when configured), RECOVERING after DOWN until `recovery_threshold` passed ticks in a row.
docs/decisions.md lists the old functions each rule replaces.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from drctl.decision.config import DecisionConfig
from drctl.decision.evidence import RegionEvidence, Verdict
from drctl.decision.headroom import usable
from drctl.decision.memory import RegionMemory

# The failures a full queue causes: the first token comes too late, or not at all.
LATE_ERRORS = frozenset({"slow", "timeout"})

Kind = Literal["fail", "pass", "unknown"]


@dataclass(frozen=True)
class Observation:
    """One tick's facts, judged on their own: `kind` feeds the hysteresis, `condition` is the
    verdict a passed tick gives."""

    kind: Kind
    condition: Verdict
    reason: str


def _lost_capacity(region: RegionEvidence) -> int:
    """Replicas the region should run but does not serve with (loading ones are coming, not lost)."""
    cap = region.capacity
    if cap is None:
        return 0
    return max(0, cap.desired - cap.ready - cap.loading)


def _over_usable(region: RegionEvidence, config: DecisionConfig) -> bool:
    cap = region.capacity
    room = usable(region, config)
    return cap is not None and room is not None and cap.load is not None and cap.load > room


def _saturated(region: RegionEvidence, last_finished: float | None, config: DecisionConfig) -> str | None:
    """Why a probe that got no completion is a full region, not a dead one; None if it is not.

    Replaces drctl/models/saturation.py::saturation: fewer replicas serve than desired (lost, or
    still loading: capacity coming, never failing) or the load is over usable capacity, the serving
    replicas fail only for a late first token, requests wait and the replicas keep finishing them.
    With neither, a full queue is a gray failure (TTFT x20 fills the slots as load does) and the
    failure stands."""
    probe = region.probe
    cap = region.capacity
    short = cap is not None and cap.ready < cap.desired
    if probe is None or not (short or _over_usable(region, config)):
        return None
    if set(probe.replicas_failing) - set(probe.replicas_late_only):
        return None
    if any(e not in LATE_ERRORS for e in probe.errors):
        return None
    if not probe.queue_waiting or probe.finished_total is None or last_finished is None:
        return None
    done = probe.finished_total - last_finished
    if done <= 0:
        return None
    return (
        f"saturated, not down: {probe.queue_waiting:g} waiting, {done:g} finished since the last "
        f"probe, short of replicas: {short}, load over usable: {_over_usable(region, config)}"
    )


def _over_objective(region: RegionEvidence, config: DecisionConfig) -> str | None:
    """The first objective the region's own traffic breaches, in words; None within it."""
    for source in (region.passive, region.capacity):
        if source is None:
            continue
        if source.ttft_p99_ms is not None and source.ttft_p99_ms > config.slo_ttft_p99_ms:
            return f"TTFT p99 {source.ttft_p99_ms:g} ms > objective {config.slo_ttft_p99_ms:g} ms"
        if source.error_rate is not None and source.error_rate > config.slo_error_rate:
            return f"error rate {source.error_rate:g} > objective {config.slo_error_rate:g}"
    if region.passive is not None and region.passive.stalled:
        return "requests stalled: none finished in the window"
    return None


def observe(region: RegionEvidence, last_finished: float | None, config: DecisionConfig) -> Observation:
    """One tick's facts judged on their own (replaces providers/probe.py::_judge and
    models/failover_plan.py::probe_passes)."""
    probe = region.probe
    if probe is None:
        return Observation("unknown", Verdict.UNKNOWN, "no probe this tick")
    if probe.auth_refused:
        # Answering but refusing drctl's credentials: health unknown, and not an outage.
        return Observation("unknown", Verdict.UNKNOWN, "probe credentials refused: health unknown")
    if not probe.answered:
        errors = ", ".join(probe.errors) or "no answer"
        return Observation("fail", Verdict.DOWN, f"gateway unreachable ({errors})")
    cap = region.capacity
    if cap is not None and cap.ready == 0:
        return Observation("fail", Verdict.DOWN, f"no ready replica ({cap.loading} loading)")
    if probe.completions_tried > 0 and probe.completions_ok == 0:
        why = _saturated(region, last_finished, config)
        if why is not None:
            return Observation("pass", Verdict.SATURATED, why)
        errors = ", ".join(probe.errors) or "no answer"
        return Observation(
            "fail", Verdict.DOWN, f"0/{probe.completions_tried} completions answered ({errors})"
        )
    ready = cap.ready if cap is not None else max(len(probe.replicas_failing), 1)
    failing = len(probe.replicas_failing)
    fraction = failing / ready
    if probe.completions_ok < probe.completions_tried:
        # Users saw errors. Excused only when they came from a minority of replicas that fail
        # their own checks (one flapping replica of many: lost capacity, not an outage).
        if not (0 < failing and fraction <= config.degraded_failing_fraction):
            return Observation(
                "fail",
                Verdict.DEGRADED,
                f"{probe.completions_ok}/{probe.completions_tried} completions answered",
            )
    if _over_usable(region, config):
        return Observation("pass", Verdict.SATURATED, "load over usable capacity")
    breach = _over_objective(region, config)
    if breach is not None and _lost_capacity(region) > 0 and (probe.queue_waiting or 0) > 0:
        return Observation("pass", Verdict.SATURATED, f"{breach}, capacity lost and requests queued")
    if fraction > config.degraded_failing_fraction:
        return Observation("pass", Verdict.DEGRADED, f"{failing}/{ready} ready replicas failing")
    if breach is not None:
        return Observation("pass", Verdict.DEGRADED, breach)
    return Observation("pass", Verdict.HEALTHY, f"answers; {failing}/{ready} ready replicas failing")


def quorum_confirms(region: RegionEvidence, quorum: int) -> tuple[bool, str]:
    """Whether enough vantage points see the region down (replaces models/quorum.py's count)."""
    if quorum <= 1:
        return True, "no quorum configured"
    down = sum(1 for v in region.votes.values() if v == "down")
    up = sum(1 for v in region.votes.values() if v == "up")
    return (
        down >= quorum,
        f"{down} of {len(region.votes)} vantage points see it down ({up} up), quorum {quorum}",
    )


def judge_region(
    region: RegionEvidence, memory: RegionMemory, config: DecisionConfig, now: datetime
) -> tuple[Verdict, str, RegionMemory]:
    """The region's verdict this tick, why, and its new memory (replaces RegionTracker.observe)."""
    seen = observe(region, memory.last_finished, config)
    finished = region.probe.finished_total if region.probe is not None else memory.last_finished
    failures, successes = memory.consecutive_failures, memory.consecutive_successes
    before = memory.verdict
    verdict: Verdict
    if seen.kind == "unknown":
        # A confirmed DOWN or RECOVERING region keeps its verdict until probes say otherwise: a
        # missed probe must not hide a dead region or cut a recovery short.
        verdict = before if before in (Verdict.DOWN, Verdict.RECOVERING) else Verdict.UNKNOWN
        reason = f"{seen.reason}; stays {verdict.value}" if verdict is before else seen.reason
    elif seen.kind == "fail":
        failures, successes = failures + 1, 0
        verdict, reason = _failed(region, before, failures, seen, config)
    else:
        failures, successes = 0, successes + 1
        verdict, reason = _passed(before, successes, seen, config)
    since = memory.since if verdict is before and memory.since is not None else now
    breaching = verdict is Verdict.SATURATED or _over_usable(region, config)
    new = memory.model_copy(
        update={
            "verdict": verdict,
            "since": since,
            "consecutive_failures": failures,
            "consecutive_successes": successes,
            "breach_since": (memory.breach_since or now) if breaching else None,
            "last_finished": finished,
        }
    )
    return verdict, reason, new


def _failed(
    region: RegionEvidence, before: Verdict, failures: int, seen: Observation, config: DecisionConfig
) -> tuple[Verdict, str]:
    if before is Verdict.DOWN:
        return Verdict.DOWN, f"{seen.reason}; still down"
    if before is Verdict.RECOVERING:
        return Verdict.DOWN, f"{seen.reason}; relapsed while recovering"
    if failures < config.failure_threshold:
        # Suspect: failing but not confirmed. Never a receiver, and it keeps its share for now.
        return Verdict.DEGRADED, f"{seen.reason}; failed {failures}/{config.failure_threshold}"
    confirmed, votes = quorum_confirms(region, config.quorum)
    if not confirmed:
        return Verdict.UNKNOWN, f"{seen.reason}; failed {failures} ticks but {votes}"
    return Verdict.DOWN, f"{seen.reason}; failed {failures}/{config.failure_threshold}, {votes}"


def _passed(
    before: Verdict, successes: int, seen: Observation, config: DecisionConfig
) -> tuple[Verdict, str]:
    if before in (Verdict.DOWN, Verdict.RECOVERING) and successes < config.recovery_threshold:
        return Verdict.RECOVERING, f"{seen.reason}; passed {successes}/{config.recovery_threshold}"
    return seen.condition, seen.reason
