"""Probes for Chaos Toolkit experiments: what a user of the global endpoint sees.

Every probe is bounded in requests and time. The region serving a request is read from the
`X-Fleetsim-Region` response header (the dev stack's servers set it; in production point `header`
at whatever the region gateways add).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from drctl.chaos import fleet, global_endpoint

REGION_HEADER = "X-Fleetsim-Region"
_MAX_REQUESTS = 500


def _client(timeout_s: float) -> httpx.Client:
    # No keep-alive: each request is a new connection, so the global tier balances every one with
    # the weights in force now, as a new user's request would be.
    return httpx.Client(timeout=timeout_s, limits=httpx.Limits(max_keepalive_connections=0))


def _model(configuration: dict[str, Any] | None) -> str:
    try:
        return fleet(configuration).workload.model
    except ValueError:
        return str((configuration or {}).get("model", "fleetsim-tiny"))


def _complete(client: httpx.Client, url: str, model: str, header: str) -> str | None:
    """One 1-token completion; the serving region on success, None on any failure."""
    try:
        resp = client.post(f"{url}/v1/completions", json={"model": model, "prompt": "drill", "max_tokens": 1})
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    return resp.headers.get(header, "")


def global_success_ratio(
    requests: int = 10, timeout_s: float = 5.0, configuration: dict[str, Any] | None = None
) -> float:
    """Fraction of `requests` completions through the global endpoint that succeed."""
    requests = max(1, min(requests, _MAX_REQUESTS))
    url, model = global_endpoint(configuration), _model(configuration)
    ok = 0
    with _client(timeout_s) as client:
        for _ in range(requests):
            ok += _complete(client, url, model, REGION_HEADER) is not None
    return ok / requests


def traffic_share(
    region: str,
    requests: int = 20,
    timeout_s: float = 5.0,
    header: str = REGION_HEADER,
    configuration: dict[str, Any] | None = None,
) -> float:
    """Fraction of `requests` completions through the global endpoint served by `region`."""
    requests = max(1, min(requests, _MAX_REQUESTS))
    url, model = global_endpoint(configuration), _model(configuration)
    served = 0
    with _client(timeout_s) as client:
        for _ in range(requests):
            served += _complete(client, url, model, header) == region
    return served / requests


def wait_for_traffic_moved(
    region: str,
    within_s: float = 30.0,
    consecutive: int = 10,
    timeout_s: float = 2.0,
    header: str = REGION_HEADER,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Wait until `consecutive` completions in a row succeed and none is served by `region`.

    Returns the seconds it took; raises TimeoutError after `within_s`, which fails the run entry
    and with it the drill.
    """
    url, model = global_endpoint(configuration), _model(configuration)
    started = time.monotonic()
    streak = 0
    with _client(timeout_s) as client:
        while time.monotonic() - started < within_s:
            served_by = _complete(client, url, model, header)
            streak = streak + 1 if served_by is not None and served_by != region else 0
            if streak >= consecutive:
                return {"moved": True, "region": region, "after_s": round(time.monotonic() - started, 3)}
            if served_by is None:
                time.sleep(0.05)  # an error answers fast; do not hammer a dying endpoint
    raise TimeoutError(f"traffic still reaches {region} or fails after {within_s:g}s")


def wait_for_served(
    within_s: float = 30.0,
    consecutive: int = 10,
    timeout_s: float = 2.0,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Wait until `consecutive` completions in a row succeed through the global endpoint."""
    url, model = global_endpoint(configuration), _model(configuration)
    started = time.monotonic()
    streak = 0
    with _client(timeout_s) as client:
        while time.monotonic() - started < within_s:
            ok = _complete(client, url, model, REGION_HEADER) is not None
            streak = streak + 1 if ok else 0
            if streak >= consecutive:
                return {"served": True, "after_s": round(time.monotonic() - started, 3)}
            if not ok:
                time.sleep(0.05)
    raise TimeoutError(f"the global endpoint did not serve {consecutive} requests in a row within {within_s:g}s")


async def _query_monitor(configuration: dict[str, Any] | None) -> dict[str, Any]:
    from drctl.temporal import connect

    cfg = fleet(configuration)
    client = await connect(cfg)
    handle = client.get_workflow_handle(f"monitor/{cfg.name}")
    status = await handle.query("status")
    if hasattr(status, "model_dump"):
        return dict(status.model_dump(mode="json"))
    return dict(status)


def monitor_status(configuration: dict[str, Any] | None = None) -> dict[str, Any]:
    """The FleetMonitor's `status` query, as JSON."""
    return asyncio.run(asyncio.wait_for(_query_monitor(configuration), timeout=15))


def region_state(region: str, configuration: dict[str, Any] | None = None) -> str:
    """The monitor's state for one region: HEALTHY, SUSPECT, UNHEALTHY or RECOVERING."""
    status = monitor_status(configuration)
    tracker = (status.get("regions") or {}).get(region)
    if not tracker:
        raise LookupError(f"the monitor reports no region {region!r}")
    return str(tracker.get("state"))
