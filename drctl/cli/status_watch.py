"""`drctl status --watch`: refresh in place on a terminal (rich Live), one block per change without one."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from rich.console import Group
from rich.live import Live
from rich.text import Text

from drctl.cli import common
from drctl.cli.status import EXIT_OK, READ_TIMEOUT_S, collect, exit_code, renderables
from drctl.config.schema import FleetConfig

# Every refresh gets at least this long to read; a refresh that could not have it is not started.
MIN_READ_S = 5.0


def _facts(data: dict[str, Any]) -> str:
    """What a change is, for `--watch` without a terminal: timings and measured figures left out."""
    keep = json.loads(json.dumps(data, default=str))
    for r in keep["regions"].values():
        for k in ("ttft_p50_ms", "duration_ms", "failing_fraction"):
            (r.get("probe") or {}).pop(k, None)
    keep.pop("last_backup", None)
    for rep in keep.get("replication") or []:
        for k in ("measured_at", "lag_s"):
            rep.pop(k, None)
    return json.dumps(keep, sort_keys=True)


def watch(cfg: FleetConfig, timeout_s: float, interval_s: float) -> int:
    """Refresh every `interval_s` until `timeout_s` is up; the exit code of the last refresh."""
    deadline = time.monotonic() + timeout_s
    code, last = EXIT_OK, None
    live = Live(console=common.console, auto_refresh=False) if common.console.is_terminal else None
    with live or contextlib.nullcontext():
        while True:
            data = common.run_async(
                lambda: collect(cfg, min(READ_TIMEOUT_S, max(MIN_READ_S, deadline - time.monotonic())))
            )
            code = exit_code(data)
            if live is not None:
                live.update(
                    Group(*renderables(cfg, data), Text(time.strftime("updated %H:%M:%S"))), refresh=True
                )
            elif _facts(data) != last:
                common.console.print(Text(time.strftime("--- %H:%M:%S")), *renderables(cfg, data), sep="\n")
                last = _facts(data)
            # The next refresh must have time to read (MIN_READ_S) before the deadline.
            if time.monotonic() + interval_s + MIN_READ_S >= deadline:
                return code
            time.sleep(interval_s)
