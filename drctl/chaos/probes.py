"""Probes for Chaos Toolkit experiments: what a user of the global endpoint sees.

Every probe is bounded in requests and time. The region serving a request is read from the
fleet's `traffic.region_header`, which the regional gateways set (`header` overrides it). Requests
carry the fleet's bearer token (`workload.auth`) when it has one, read from the environment or the
file the config names, so an experiment's journal never holds it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from drctl.chaos import fleet, global_endpoint
from drctl.providers import completions
from drctl.providers.auth import auth_headers

REGION_HEADER = "x-drctl-region"  # the config's default, for experiments run without a fleet config
_MAX_REQUESTS = 500


def _client(timeout_s: float, configuration: dict[str, Any] | None) -> httpx.Client:
    try:
        headers = auth_headers(fleet(configuration))
    except ValueError:  # no fleet config: an anonymous endpoint
        headers = {}
    return httpx.Client(timeout=timeout_s, limits=completions.fresh_connections(1), headers=headers)


def _header(configuration: dict[str, Any] | None, header: str | None) -> str:
    if header:
        return header
    try:
        return fleet(configuration).traffic.region_header
    except ValueError:
        return REGION_HEADER


def _model(configuration: dict[str, Any] | None) -> str:
    try:
        return fleet(configuration).workload.model
    except ValueError:
        model = (configuration or {}).get("model")
        if not model:
            raise ValueError("experiment configuration names neither 'fleet_config' nor 'model'") from None
        return str(model)


def _complete(client: httpx.Client, url: str, model: str, header: str) -> str | None:
    """One 1-token completion; the serving region on success ("" when unattributed), None on failure."""
    answer = completions.complete_sync(client, completions.url_of(url), model, "drill", header)
    return (answer.region or "") if answer.ok else None


def _served_by(
    requests: int, timeout_s: float, header: str | None, configuration: dict[str, Any] | None
) -> list[str | None]:
    """`requests` completions (bounded) through the global endpoint: each one's serving region, None if failed."""
    requests = max(1, min(requests, _MAX_REQUESTS))
    url, model, name = global_endpoint(configuration), _model(configuration), _header(configuration, header)
    with _client(timeout_s, configuration) as client:
        return [_complete(client, url, model, name) for _ in range(requests)]


def global_success_ratio(
    requests: int = 10, timeout_s: float = 5.0, configuration: dict[str, Any] | None = None
) -> float:
    """Fraction of `requests` completions through the global endpoint that succeed."""
    answers = _served_by(requests, timeout_s, None, configuration)
    return sum(a is not None for a in answers) / len(answers)


def traffic_share(
    region: str,
    requests: int = 20,
    timeout_s: float = 5.0,
    header: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> float:
    """Fraction of `requests` completions through the global endpoint served by `region`."""
    answers = _served_by(requests, timeout_s, header, configuration)
    return sum(a == region for a in answers) / len(answers)


def wait_for_traffic_moved(
    region: str,
    within_s: float = 30.0,
    consecutive: int = 10,
    timeout_s: float = 2.0,
    header: str | None = None,
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Wait until `consecutive` completions in a row succeed and none is served by `region`.

    Returns the seconds it took; raises TimeoutError after `within_s`, which fails the run entry
    and with it the drill.
    """
    url, model = global_endpoint(configuration), _model(configuration)
    started = time.monotonic()
    streak = 0
    with _client(timeout_s, configuration) as client:
        while time.monotonic() - started < within_s:
            served_by = _complete(client, url, model, _header(configuration, header))
            # An answer without the region header ("") proves nothing about where it was served.
            streak = streak + 1 if served_by and served_by != region else 0
            if streak >= consecutive:
                return {"moved": True, "region": region, "after_s": round(time.monotonic() - started, 3)}
            if served_by is None:
                time.sleep(0.05)  # an error answers fast; do not hammer a dying endpoint
    raise TimeoutError(f"traffic still reaches {region}, fails or is unattributed after {within_s:g}s")


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
    with _client(timeout_s, configuration) as client:
        while time.monotonic() - started < within_s:
            ok = _complete(client, url, model, _header(configuration, None)) is not None
            streak = streak + 1 if ok else 0
            if streak >= consecutive:
                return {"served": True, "after_s": round(time.monotonic() - started, 3)}
            if not ok:
                time.sleep(0.05)
    raise TimeoutError(
        f"the global endpoint did not serve {consecutive} requests in a row within {within_s:g}s"
    )


def http_request(
    url: str,
    method: str = "GET",
    timeout: float = 5.0,
    max_retries: int = 0,
    headers: dict[str, str] | None = None,
    params: Any = None,
) -> dict[str, Any]:
    """What an experiment's `http` provider runs (drctl/chaos/boundary.py rewrites it to this).

    Chaos Toolkit's own http provider (chaoslib 1.44) sends every request through
    `requests.Session.request` with its default `allow_redirects=True` and has no key to turn that
    off, so a fleet URL the validator approved could redirect the worker to any host. This makes
    the same request with httpx, which parsed and approved the URL, and never follows a redirect: a
    3xx is the probe's answer. The result has chaoslib's shape, so tolerances read it the same way.
    """
    transport = httpx.HTTPTransport(retries=max_retries)
    with httpx.Client(timeout=timeout, transport=transport, follow_redirects=False) as client:
        resp = client.request(method, url, headers=headers, params=params)
    body: Any = resp.text
    if resp.headers.get("Content-Type") == "application/json" and body:
        body = resp.json()
    return {"status": resp.status_code, "headers": dict(resp.headers), "body": body}


async def _query_monitor(configuration: dict[str, Any] | None) -> dict[str, Any]:
    from drctl.client.connection import connect

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
