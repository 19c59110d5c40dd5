"""Break-glass failover: the Failover's preflight and shift, run in this process without Temporal.

For the hour Temporal (or the region hosting it) is gone: run from a host that reaches the global
tier, e.g. the surviving region's worker pod. It uses what the Failover's activities use, and only
that: the global tier's provider (read, apply, read back), the inference prober on the target, the
target's Deployment for capacity and scale, the pure planner `plan_failover`, so the plan is the one
the workflow would have made, and the verification through the global endpoint. Like an emergency
failover it scales the target without waiting for the rollout (a break-glass move is an emergency
one); the record says what was scaled and what the verification saw. Lives in the worker layer
because, like the worker, it runs infrastructure in-process; the CLI reaches it through one allowed
import (pyproject.toml).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from drctl.client.connection import TemporalUnreachable, connect, target
from drctl.config.schema import FleetConfig
from drctl.models.activity_io import Capacity, VerifyInput
from drctl.models.breakglass import BreakGlassRecord
from drctl.models.failover import capacity_of, plan_failover, target_problem
from drctl.models.fleet_spec import FleetSpec
from drctl.providers import aws
from drctl.providers.kubernetes import KubernetesPlatform
from drctl.providers.probe import InferenceProber
from drctl.providers.traffic_factory import global_traffic
from drctl.providers.verify import verify_global

# Long enough for a TLS handshake to a distant region, short enough for an operator at 3 a.m.
REACH_TIMEOUT_S = 5.0
VERIFY_PAUSE_S = 0.5  # between verification attempts, as the Failover's
KEY_PREFIX = "breakglass"
_MAX_RECORD_BYTES = 4 * 1024 * 1024


def temporal_unreachable(cfg: FleetConfig, timeout_s: float = REACH_TIMEOUT_S) -> str | None:
    """Why Temporal cannot be reached (a real connection attempt, bounded by `timeout_s`); None
    when it answered. A config error (a missing key file) is raised: that is not an outage."""

    async def attempt() -> str | None:
        address = target(cfg).address
        try:
            # Client.connect is eager: it dials and asks the server for its system info.
            await asyncio.wait_for(connect(cfg), timeout_s)
        except TimeoutError:
            return f"no answer from Temporal at {address} within {timeout_s:g} s"
        except TemporalUnreachable as exc:
            return str(exc)
        return None

    return asyncio.run(attempt())


def audit_bucket(cfg: FleetConfig) -> str:
    return cfg.failover.audit_bucket or cfg.drills.history_bucket


def new_record(
    cfg: FleetConfig, who: str, target_region: str, forced: bool, temporal: str
) -> BreakGlassRecord:
    now = datetime.now(UTC)
    return BreakGlassRecord(
        id=f"{cfg.name}/{now:%Y%m%dT%H%M%S}Z",
        fleet=cfg.name,
        who=who,
        host=socket.gethostname() or "unknown-host",
        started_at=now,
        finished_at=now,
        source=None,
        target=target_region,
        forced=forced,
        status="failed",
        temporal=temporal,
    )


def _capacity(cfg: FleetConfig, region: str) -> Capacity:
    name = cfg.workload.deployment_name("stable")
    d = KubernetesPlatform(cfg.region(region)).get_deployment(name)
    return capacity_of(
        region,
        name,
        d.replicas,
        d.ready_replicas,
        cfg.region(region).max_replicas,
        d.hpa_min_replicas,
        d.hpa_max_replicas,
    )


def preflight(cfg: FleetConfig, rec: BreakGlassRecord, source: str | None, emergency: bool) -> None:
    """The Failover's preflight reads and plan, into `rec`; the plan's problems refuse unless forced.

    The target is always probed (the evidence), but with --force its verdict refuses nothing, as
    the workflow's --force skips the probe's verdict.
    """
    rec.weights_before = global_traffic(cfg).get_weights()
    rec.probe = asyncio.run(InferenceProber(cfg).probe_region(rec.target))
    rec.capacity = _capacity(cfg, rec.target)
    spec = FleetSpec.from_config(cfg)
    issue = None if rec.forced else target_problem(rec.probe, emergency, spec.fail_on_degraded)
    rec.plan = plan_failover(
        spec,
        rec.weights_before,
        rec.target,
        source,
        rec.capacity,
        emergency=emergency,
        force=rec.forced,
        target_issue=issue,
    )
    rec.source = rec.plan.source
    if rec.plan.problems:
        rec.status, rec.error = "refused", "; ".join(rec.plan.problems)


def read_weights(cfg: FleetConfig) -> dict[str, int]:
    return global_traffic(cfg).get_weights()


def scale(cfg: FleetConfig, rec: BreakGlassRecord) -> None:
    """The Failover's pre-scale of the target to the plan's replicas, without its wait: an emergency
    move never waits for capacity (docs/failover.md); the replicas come while traffic moves. A
    failure is recorded and the shift goes on."""
    plan = rec.plan
    assert plan is not None  # preflight ran
    n = plan.target_replicas_planned
    if n <= plan.target_replicas_before:
        return
    try:
        KubernetesPlatform(cfg.region(rec.target)).scale(cfg.workload.deployment_name("stable"), n)
    except Exception as exc:  # noqa: BLE001 - any API error: recorded, traffic still moves
        rec.scale_error = f"scale {rec.target} to {n} replicas: {exc}"[:1000]
        return
    rec.scaled_to = n


def verify(cfg: FleetConfig, rec: BreakGlassRecord) -> None:
    """The Failover's verification: completions through the global endpoint until every one is
    answered and none by a drained region, within `verify_timeout_s` plus the global tier's TTL."""
    spec = FleetSpec.from_config(cfg)
    sources = [s for s in (rec.source or "").split(",") if s]
    deadline = time.monotonic() + spec.verify_deadline_s
    while True:
        left = deadline - time.monotonic()
        inp = VerifyInput(requests=spec.verify_requests, timeout_s=max(1.0, min(left, 10.0)))
        rec.verify = asyncio.run(verify_global(cfg, inp))
        v = rec.verify
        if v.ok == v.total and v.served_by(sources) == 0 and v.unattributed in (0, v.ok):
            return
        if time.monotonic() + VERIFY_PAUSE_S >= deadline:
            rec.status = "unverified"
            rec.error = (
                f"not verified within {spec.verify_deadline_s:g} s: {v.ok}/{v.total} ok, by region "
                f"{v.by_region}" + (f", errors e.g. {v.error_samples[0]}" if v.error_samples else "")
            )
            return
        time.sleep(VERIFY_PAUSE_S)


def shift(cfg: FleetConfig, rec: BreakGlassRecord) -> None:
    """Apply the plan's weights at once and read them back, into `rec`."""
    assert rec.plan is not None  # preflight ran
    tier = global_traffic(cfg)
    applied = tier.apply_weights(rec.plan.weights_after)
    rec.change_id, rec.change_status = applied.change_id, applied.status
    rec.weights_after = tier.get_weights()
    rec.status = "succeeded"


def store(cfg: FleetConfig, rec: BreakGlassRecord) -> str:
    """Write `rec` to the audit bucket; its s3:// URI. Raises whatever S3 raised."""
    bucket, key = audit_bucket(cfg), f"{KEY_PREFIX}/{rec.id}.json"
    aws.client(cfg, "s3").put_object(
        Bucket=bucket,
        Key=key,
        Body=rec.model_dump_json(indent=2).encode(),
        ContentType="application/json",
        # Never overwrite an earlier record of the same second: evidence is append-only.
        IfNoneMatch="*",
    )
    return f"s3://{bucket}/{key}"


def load(cfg: FleetConfig, uri: str) -> BreakGlassRecord:
    """The record at `uri` (s3://bucket/key, or a file holding the JSON printed on stdout).

    Raises ValueError naming the uri when it is not a record of this fleet."""
    if uri.startswith("s3://"):
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        if not bucket or not key:
            raise ValueError(f"{uri}: expected s3://<bucket>/<key>")
        body = aws.client(cfg, "s3").get_object(Bucket=bucket, Key=key)["Body"].read(_MAX_RECORD_BYTES + 1)
    else:
        path = Path(uri)
        if not path.is_file():
            raise ValueError(f"{uri}: no such file (give s3://<bucket>/<key> or the saved JSON record)")
        with path.open("rb") as f:
            body = f.read(_MAX_RECORD_BYTES + 1)
    if len(body) > _MAX_RECORD_BYTES:
        raise ValueError(f"{uri}: larger than {_MAX_RECORD_BYTES} bytes; not a break-glass record")
    try:
        rec = BreakGlassRecord.model_validate(json.loads(body))
    except ValueError as exc:
        raise ValueError(f"{uri}: not a break-glass record: {exc}") from None
    problem = rec.problem_for(cfg.name, cfg.region_names)
    if problem:
        raise ValueError(f"{uri}: {problem}")
    return rec
