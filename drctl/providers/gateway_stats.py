"""A region gateway's own counters, read over the HAProxy runtime API (`show stat`), as passive signals.

The BACKEND row of the regional tier's backend counts what the region answered its users:
`req_tot` requests and `hrsp_5xx` 5xx answers. A request whose connection attempts all failed is
answered 503 by HAProxy and counted in `hrsp_5xx` too (its `econ` rises as well, so `econ` is
carried for context, not added). `qcur` is the queue, and `rtime` the mean time to response
headers over the last 1024 requests; for an SSE stream whose server sends its headers with the
first token, that is the time to first token. Field names are those of the HAProxy management
guide, section 9.1 (CSV format), and are looked up by the header line, never by position: 2.6 to
3.2 add and reorder columns, and keep these (tests/providers/transcripts/haproxy-*/).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from drctl.models.passive import SignalSnapshot
from drctl.providers.haproxy_runtime import HAProxyBadReply, HAProxyError, HAProxyRuntime

# `show stat <proxy> <type> <sid>`: proxy -1 is every proxy, type 2 the BACKEND rows, sid -1 all.
SHOW_BACKENDS = "show stat -1 2 -1"


@dataclass(frozen=True)
class BackendStats:
    backend: str
    status: str  # UP, DOWN (no usable server), ...
    req_tot: int
    hrsp_5xx: int
    econ: int
    qcur: int
    rtime_ms: int  # mean over the last 1024 requests


def _int(row: dict[str, str], key: str) -> int:
    value = row.get(key, "")
    return int(value) if value.isdigit() else 0


def parse_show_stat(reply: str) -> list[dict[str, str]]:
    """The CSV of `show stat` as one dict per row, keyed by the header's field names."""
    lines = [ln for ln in reply.strip("\n").splitlines() if ln]
    if not lines or not lines[0].startswith("# pxname,svname,"):
        raise HAProxyBadReply(f"unexpected `show stat` output: {reply[:200]!r}", reply=reply)
    cols = lines[0][2:].split(",")
    return [dict(zip(cols, ln.split(","), strict=False)) for ln in lines[1:]]


def backend_stats(reply: str) -> dict[str, BackendStats]:
    """The BACKEND row of every backend in a `show stat` reply."""
    out = {}
    for row in parse_show_stat(reply):
        if row.get("svname") != "BACKEND":
            continue
        name = row.get("pxname", "")
        out[name] = BackendStats(
            backend=name,
            status=row.get("status", ""),
            req_tot=_int(row, "req_tot"),
            hrsp_5xx=_int(row, "hrsp_5xx"),
            econ=_int(row, "econ"),
            qcur=_int(row, "qcur"),
            rtime_ms=_int(row, "rtime"),
        )
    return out


def gateway_snapshots(
    runtime: HAProxyRuntime, region: str, backends: list[str], clock: Callable[[], float] = time.monotonic
) -> list[SignalSnapshot]:
    """One snapshot per named backend of this region's gateway; raises HAProxyError if it cannot be read.

    A named backend that the gateway does not have is a config error, not silence: it raises.
    """
    reply = runtime.command(SHOW_BACKENDS)
    taken_at = clock()
    stats = backend_stats(reply)
    missing = [b for b in backends if b not in stats]
    if missing:
        raise HAProxyError(
            f"gateway of {region} at {runtime.socket_path} has no backend {', '.join(missing)}"
        )
    return [
        SignalSnapshot(
            source=f"gateway:{b}",
            kind="gateway",
            region=region,
            taken_at=taken_at,
            requests_total=stats[b].req_tot,
            errors_total=stats[b].hrsp_5xx,
            queue=stats[b].qcur,
            # HAProxy reports 0 before any response: no mean yet, not a fast one.
            response_time_avg_ms=stats[b].rtime_ms if stats[b].req_tot else None,
            connect_errors_total=stats[b].econ,
        )
        for b in backends
    ]
