"""Saturated, not down: a region whose probes fail only because it is full of users' requests.

A region that lost part of its capacity under load fills its replicas (vLLM's running at
max_num_seqs) and queues the rest (`vllm:num_requests_waiting`). The monitor's probe completion
then waits behind that queue and gets no first token in time, exactly as it would from a dead
engine, and three such rounds would make the region UNHEALTHY: a full failover that moves the whole
overload onto the target, which may not carry it either, and back again when it breaks.

The probe can tell the two apart from what vLLM itself exports: a saturated region has lost
replicas, its gateway
answers and its serving replicas have requests waiting and keep finishing them
(`vllm:request_success_total` grows between two probes); a hung or dead one does not. Replicas
that are gone (the lost node) are the capacity it lost, not a reason to call the rest down.

While the rebalance is automatic, such a probe is a capacity problem for the rebalance to shed
(workflows/monitor_rebalance.py), not an outage: the monitor counts it as passed. Anything else (a
refused connection, a 5xx, a missing model, no progress, no queue) keeps today's verdict, so a
region that is down still gets the full failover.
"""

from __future__ import annotations

from drctl.models.failover import probe_passes
from drctl.models.health import ProbeStatus, RegionProbe, TargetProbe
from drctl.models.monitor import RegionTracker

# The failures a full queue causes: the completion's first token comes too late, or not at all.
_QUEUE_FAILURES = ("slow", "timeout")


def finished_total(probe: RegionProbe) -> float | None:
    """Requests the region's replicas have finished, summed (None when no replica exports it)."""
    counts = [r.finished for r in probe.replicas if r.finished is not None]
    return sum(counts) if counts else None


def saturation(
    probe: RegionProbe, finished_before: float | None, expected_replicas: int | None = None
) -> str | None:
    """Why a failing probe is a saturated region rather than a down one, or None.

    `finished_before` is `finished_total` of the region's previous probe: progress needs two reads.
    `expected_replicas` is the region's configured replica count. Only a region that lost
    capacity is judged saturated: some of its replicas are gone (refused, 5xx, or no longer listed
    at all, as Kubernetes drops a lost node's pods from the EndpointSlices). A region with every
    replica serving and a queue that still grows is slow, not short (a gray failure: TTFT ×20 fills
    the slots just as load does), and its probe's verdict stands.
    """
    if probe.status in (ProbeStatus.HEALTHY, ProbeStatus.AUTH):
        return None
    # What users meet: the gateway answers and fails, if at all, only for a late first token.
    if probe.gateway.status is not ProbeStatus.HEALTHY and not _queued_failure(probe.gateway):
        return None
    # Replicas that are gone (refused, 5xx) are the capacity the region lost; the ones still
    # serving must be healthy or only late behind their queue.
    serving = [r for r in probe.replicas if r.status is ProbeStatus.HEALTHY or _queued_failure(r)]
    measured = [r for r in serving if r.queue_depth is not None and r.running is not None]
    gone = len(probe.replicas) - len(serving)
    if expected_replicas is not None:
        gone = max(gone, expected_replicas - len(serving))
    if gone <= 0:  # nothing lost: a full queue on every replica is slowness, not lost capacity
        return None
    waiting = sum(r.queue_depth or 0.0 for r in measured)
    finished = finished_total(probe)  # every replica's: one that went away makes it fall (not judged)
    if not measured or waiting <= 0 or finished is None or finished_before is None:
        return None
    done = finished - finished_before
    if done <= 0:  # no request finished since the last probe: hung, whatever its queue says
        return None
    running = sum(r.running or 0.0 for r in measured)
    return (
        f"saturated, not down: {waiting:g} requests waiting and {running:g} running on "
        f"{len(measured)} replica(s) ({gone} gone), {done:g} finished "
        "since the last probe; the probe only waited behind the queue"
    )


def _queued_failure(t: TargetProbe) -> bool:
    """A target that answered /health and failed only for lack of a first token in time."""
    return t.error_class in _QUEUE_FAILURES and t.latency_ms is not None


def judge_probe(
    t: RegionTracker,
    probe: RegionProbe,
    fail_on_degraded: bool,
    shed_saturation: bool,
    expected_replicas: int | None = None,
) -> bool:
    """Whether the probe counts as a good check for the tracker's state machine (monitor round and
    watcher alike). With `shed_saturation` (the rebalance is automatic) a probe that failed only
    behind a full, progressing queue counts as good, and `t.saturated` says why."""
    before, t.last_finished = t.last_finished, finished_total(probe)
    passed = probe_passes(probe, fail_on_degraded)
    t.saturated = None if passed or not shed_saturation else saturation(probe, before, expected_replicas)
    return passed or t.saturated is not None
