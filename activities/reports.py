"""Drill history in S3: one JSON report, one markdown report and the raw journal per drill.

Keys: `reports/<fleet>/<ts>.json|.md` and `journals/<fleet>/<ts>.json`, where <ts> is the last
part of the drill id `drill/<fleet>/<ts>`.
`ReportStore` is plain boto3 (the CLI reads history with it directly); the activities wrap it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from botocore.config import Config as BotoConfig
from temporalio import activity

from activities.errors import app_error
from drctl import metrics
from drctl.config import FleetConfig
from drctl.models.drill import DrillReport, ReportKey
from drctl.providers import aws

_MAX_LISTED = 500
# One try per call, each bounded: the drill's activity retry policy retries for minutes with backoff,
# and botocore's own retries would hide the S3 error (and the time spent) inside one attempt.
_S3_CONFIG = BotoConfig(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=5, read_timeout=15)


_ID_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,120}$")


def _split(drill_id: str) -> tuple[str, str]:
    parts = drill_id.split("/")
    # The parts become object keys: nothing that reads as a path step ('..') or carries odd bytes.
    if len(parts) != 3 or parts[0] != "drill" or not all(_ID_PART.match(x) and ".." not in x for x in parts[1:]):
        raise ValueError(f"not a drill id: {drill_id!r} (expected drill/<fleet>/<timestamp>)")
    return parts[1], parts[2]


def render_markdown(r: DrillReport) -> str:
    rto = f"{r.measured_rto_s:.1f} s" if r.measured_rto_s is not None else "n/a"
    lines = [
        f"# Drill {r.id}: **{r.verdict.value}**",
        "",
        f"- Experiment: `{r.experiment}`: {r.title}",
        f"- Fleet: `{r.fleet}`, target region `{r.target_region}`",
        f"- Started {r.started_at.isoformat()}, finished {r.finished_at.isoformat()}",
        f"- Fault injected: {'yes at ' + r.fault_at.isoformat() if r.fault_injected and r.fault_at else 'no'}",
        f"- Failover expected: {'yes' if r.expect_failover else 'no'}",
        f"- Measured RTO: {rto} (target {r.rto_target_s:g} s)",
        f"- User-visible error window: {r.error_window_s:.1f} s ({r.errors} of {r.requests} requests failed)",
        f"- Served by: {', '.join(f'{k} {v}' for k, v in sorted(r.served_by.items())) or 'nothing'}",
    ]
    if r.data_loss_objects is not None:
        lag = f"{r.data_loss_s:.1f} s" if r.data_loss_s is not None else "unknown"
        lines.append(f"- Data-loss exposure at failover: {lag} of replication lag, {r.data_loss_objects} object(s)")
    if r.failover_done_after_s is not None:
        lines.append(f"- Failover workflow closed {r.failover_done_after_s:.1f} s after the fault")
    if r.reasons:
        lines += ["", "## Why not PASS", *[f"- {x}" for x in r.reasons]]
    if r.failover_phases:
        lines += ["", "## Failover phases", "| phase | seconds |", "|---|---|"]
        lines += [f"| {p.get('phase')} | {p.get('duration_s')} |" for p in r.failover_phases]
    if r.phases:
        lines += ["", "## Drill phases", "| phase | seconds |", "|---|---|"]
        lines += [f"| {p.get('phase')} | {p.get('duration_s')} |" for p in r.phases]
    return "\n".join(lines) + "\n"


class ReportStore:
    def __init__(self, cfg: FleetConfig, config: BotoConfig | None = None) -> None:
        self.bucket = cfg.drills.history_bucket
        self.s3 = aws.client(cfg, "s3", config=config)

    def put_journal(self, drill_id: str, journal: dict[str, Any]) -> str:
        fleet, ts = _split(drill_id)
        key = f"journals/{fleet}/{ts}.json"
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=json.dumps(journal, default=str).encode(),
                           ContentType="application/json")
        return key

    def put(self, report: DrillReport) -> str:
        fleet, ts = _split(report.id)
        key = f"reports/{fleet}/{ts}"
        self.s3.put_object(Bucket=self.bucket, Key=f"{key}.json", Body=report.model_dump_json(indent=2).encode(),
                           ContentType="application/json")
        self.s3.put_object(Bucket=self.bucket, Key=f"{key}.md", Body=render_markdown(report).encode(),
                           ContentType="text/markdown")
        return f"{key}.json"

    def get(self, drill_id: str) -> DrillReport:
        fleet, ts = _split(drill_id)
        body = self.s3.get_object(Bucket=self.bucket, Key=f"reports/{fleet}/{ts}.json")["Body"].read()
        return DrillReport.model_validate_json(body)

    def get_markdown(self, drill_id: str) -> str:
        fleet, ts = _split(drill_id)
        return self.s3.get_object(Bucket=self.bucket, Key=f"reports/{fleet}/{ts}.md")["Body"].read().decode()

    def list(self, fleet: str, limit: int = 50) -> list[DrillReport]:
        """Most recent first, at most `limit`."""
        objects: list[dict[str, Any]] = []
        paginator = self.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=f"reports/{fleet}/"):
            objects += [o for o in page.get("Contents", []) if o["Key"].endswith(".json")]
            if len(objects) >= _MAX_LISTED:
                break
        # Manual and scheduled drill ids differ in form, so order by when the report was written.
        objects.sort(key=lambda o: (o["LastModified"], o["Key"]), reverse=True)
        keys = [o["Key"] for o in objects[: max(1, limit)]]
        out: list[DrillReport] = []
        for key in keys:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            out.append(DrillReport.model_validate_json(body))
        return out


class ReportActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self._store: ReportStore | None = None

    @property
    def store(self) -> ReportStore:
        if self._store is None:
            self._store = ReportStore(self.cfg, _S3_CONFIG)
        return self._store

    @activity.defn(name="drill_store_report")
    def store_report(self, report: DrillReport) -> ReportKey:
        try:
            key = ReportKey(id=self.store.put(report))
        except Exception as exc:  # noqa: BLE001 - mapped through the one error table
            raise app_error(exc, f"store drill report in s3://{self.store.bucket}") from exc
        # Recorded once the report is stored: the drill's one durable end, reached once per drill.
        metrics.record_drill(report.fleet, report.verdict.value, report.measured_rto_s, report.finished_at.timestamp())
        return key



def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    acts = ReportActivities(cfg)
    return [acts.store_report]
