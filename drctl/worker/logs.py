"""Worker logging: text for a terminal, or one JSON object per line for a log pipeline.

Every line carries fleet, region, operation and workflow_id (null when the line is about no workflow),
so `jq 'select(.workflow_id == "failover/prod")'` follows one operation across workers. They come from
the `temporal_activity` / `temporal_workflow` extras that `activity.logger` and `workflow.logger` add,
or from the running activity's info for plain loggers called inside an activity.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any, Literal

from temporalio import activity, workflow
from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig

from drctl.config.schema import FleetConfig
from drctl.models.safe_text import safe_text

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CONTEXT_FIELDS = ("fleet", "region", "operation", "workflow_id")
# A log line quotes reasons servers wrote, Kubernetes messages, S3 keys and config values: its
# message is escaped to one line (no ESC, C1, bidi or forged newline) and cut to this.
MESSAGE_CHARS = 8000
TRACEBACK_CHARS = 32000


def operation_of(workflow_id: str | None) -> str | None:
    """`failover/prod` -> `failover`: every drctl workflow id starts with its operation."""
    if not workflow_id:
        return None
    return workflow_id.split("/", 1)[0] if "/" in workflow_id else None


class ContextFilter(logging.Filter):
    """Puts fleet, region, operation and workflow_id on every record (None where unknown).

    region is the region whose task queue the activity or workflow task came from; on the main queue it
    is the region this worker runs in, when it serves exactly one.
    """

    def __init__(self, cfg: FleetConfig | Sequence[FleetConfig], regions: list[str] | None) -> None:
        super().__init__()
        cfgs = [cfg] if isinstance(cfg, FleetConfig) else list(cfg)
        # A worker serving many fleets tells them apart by task queue (each fleet has its own).
        self.fleet = cfgs[0].name if len(cfgs) == 1 else None
        self.by_queue = {r.queue: (c.name, r.name) for c in cfgs for r in c.regions}
        self.home = regions[0] if regions and len(regions) == 1 else None
        self.main = {c.temporal.task_queue: (c.name, self.home) for c in cfgs}

    def _details(self, record: logging.LogRecord) -> Mapping[str, Any]:
        for key in ("temporal_activity", "temporal_workflow"):
            found = getattr(record, key, None)
            if isinstance(found, Mapping):
                return found
        if activity.in_activity():  # a plain logger called from activity code
            info = activity.info()
            return {
                "workflow_id": info.workflow_id,
                "task_queue": info.task_queue,
                "activity_type": info.activity_type,
            }
        return {}

    def filter(self, record: logging.LogRecord) -> bool:
        details = self._details(record)
        wid = details.get("workflow_id")
        queue = details.get("task_queue") or ""
        fleet, region = self.by_queue.get(queue) or self.main.get(queue) or (self.fleet, self.home)
        record.fleet = fleet
        record.workflow_id = wid
        record.operation = operation_of(wid)
        record.region = region
        record.activity = details.get("activity_type")
        record.workflow_type = details.get("workflow_type")
        return True


def shown_message(record: logging.LogRecord) -> str:
    """The record's message as a reader may see it: escaped, one line, bounded."""
    return safe_text(record.getMessage(), limit=MESSAGE_CHARS)


def shown_exception(text: str) -> str:
    # A traceback keeps its own lines; the exception message inside it is still escaped.
    return safe_text(text, keep_newlines=True, limit=TRACEBACK_CHARS)


class TextFormatter(logging.Formatter):
    """TEXT_FORMAT, with the message and any traceback escaped (the one escaper, safe_text)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = shown_message(record)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's name
        return shown_exception(super().formatException(ei))


class JsonFormatter(logging.Formatter):
    """One JSON object per line; context fields are always present so queries need no defaults."""

    def format(self, record: logging.LogRecord) -> str:
        ts = dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds")
        out: dict[str, Any] = {
            "ts": ts.replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            # json.dumps escapes control bytes for the pipe, not for whoever prints the field later.
            "message": shown_message(record),
        }
        for key in CONTEXT_FIELDS:
            out[key] = getattr(record, key, None)
        for key in ("activity", "workflow_type"):
            if getattr(record, key, None):
                out[key] = getattr(record, key)
        if record.exc_info:
            out["exception"] = shown_exception(self.formatException(record.exc_info))
        return json.dumps(out, default=str)


def core_logging() -> LoggingConfig:
    """The SDK core (Rust) writes its own log lines to stderr unless forwarded; forward them here."""
    return LoggingConfig(
        filter="WARN", forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core"))
    )


def setup(
    fmt: LogFormat,
    cfg: FleetConfig | Sequence[FleetConfig],
    regions: list[str] | None,
    level: int = logging.INFO,
    stream: IO[str] | None = None,
) -> None:
    """Route every log line of this process through one stderr handler in the chosen format."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter(cfg, regions))
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
        # The same details are fields now; repeated in the message they would only be noise.
        activity.logger.activity_info_on_message = False
        workflow.logger.workflow_info_on_message = False
        Runtime.set_default(
            Runtime(telemetry=TelemetryConfig(logging=core_logging())), error_if_already_set=False
        )
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
