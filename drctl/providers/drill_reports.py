"""Drill history in S3: one JSON report, one markdown report and the raw journal per drill.

Keys: `reports/<fleet>/<ts>.json|.md` and `journals/<fleet>/<ts>.json`, where <ts> is the last
part of the drill id `drill/<fleet>/<ts>`. Plain boto3: the CLI reads history with it directly,
and the drill's activities (activities/reports.py, activities/chaos.py) write through it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from botocore.config import Config as BotoConfig

from drctl.config.schema import FleetConfig
from drctl.models.drill import DrillReport
from drctl.providers import aws

_MAX_LISTED = 500
_ID_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,120}$")


def _split(drill_id: str) -> tuple[str, str]:
    parts = drill_id.split("/")
    # The parts become object keys: nothing that reads as a path step ('..') or carries odd bytes.
    if (
        len(parts) != 3
        or parts[0] != "drill"
        or not all(_ID_PART.match(x) and ".." not in x for x in parts[1:])
    ):
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
        *([f"- SLO: {r.slo_evidence}"] if r.slo_evidence else []),
        f"- User-visible error window: {r.error_window_s:.1f} s ({r.errors} of {r.requests} requests failed)",
        f"- Served by: {', '.join(f'{k} {v}' for k, v in sorted(r.served_by.items())) or 'nothing'}",
    ]
    if r.data_loss_objects is not None:
        lag = f"{r.data_loss_s:.1f} s" if r.data_loss_s is not None else "unknown"
        lines.append(
            f"- Data-loss exposure at failover: {lag} of replication lag, {r.data_loss_objects} object(s)"
        )
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
        self.s3.put_object(
            Bucket=self.bucket,
            Key=key,
            Body=json.dumps(journal, default=str).encode(),
            ContentType="application/json",
        )
        return key

    def put(self, report: DrillReport) -> str:
        fleet, ts = _split(report.id)
        key = f"reports/{fleet}/{ts}"
        self.s3.put_object(
            Bucket=self.bucket,
            Key=f"{key}.json",
            Body=report.model_dump_json(indent=2).encode(),
            ContentType="application/json",
        )
        self.s3.put_object(
            Bucket=self.bucket,
            Key=f"{key}.md",
            Body=render_markdown(report).encode(),
            ContentType="text/markdown",
        )
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
