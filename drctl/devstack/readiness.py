"""Readiness checks for each dev-stack component: does it answer the way its clients need?

Each check returns None when ready, else a short reason (shown when the deadline passes).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import httpx

from drctl.config.schema import FleetConfig, RegionConfig
from drctl.providers.auth import AuthConfigError, auth_headers

Check = Callable[[], "str | None"]
TIMEOUT_S = 3.0


def completion_body(cfg: FleetConfig) -> dict:
    return {"model": cfg.workload.model, "prompt": "ping", "max_tokens": 1}


def answers_completion(base_url: str, cfg: FleetConfig) -> str | None:
    try:
        # A fleet whose servers run with an API key is ready when it answers drctl's own token.
        headers = auth_headers(cfg)
        r = httpx.post(
            f"{base_url.rstrip('/')}/v1/completions",
            json=completion_body(cfg),
            timeout=TIMEOUT_S,
            headers=headers,
        )
    except AuthConfigError as exc:
        return str(exc)
    except httpx.HTTPError as exc:
        return f"{base_url}: {type(exc).__name__}: {exc}"
    return None if r.status_code == 200 else f"{base_url}/v1/completions answered {r.status_code}"


def _temporal(temporal_bin: str, cfg: FleetConfig, *command: str) -> subprocess.CompletedProcess[str] | str:
    """`temporal <command>` against the fleet's server: its process, or why it did not answer in time."""
    argv = [temporal_bin, *command, "--address", cfg.temporal.address, "--namespace", cfg.temporal.namespace]
    try:
        return subprocess.run([*argv, "--command-timeout", "3s"], capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return f"{' '.join(command[:2])} timed out"


def temporal_ready(temporal_bin: str, cfg: FleetConfig) -> str | None:
    # The CLI does a real gRPC round trip (DescribeNamespace), without an event loop in this process.
    done = _temporal(temporal_bin, cfg, "operator", "namespace", "describe")
    if isinstance(done, str):
        return done
    if done.returncode != 0:
        return (
            (done.stderr or done.stdout).strip().splitlines()[-1:][0]
            if (done.stderr or done.stdout)
            else "failed"
        )
    return None


def worker_polling(temporal_bin: str, cfg: FleetConfig, task_queue: str) -> str | None:
    """A worker counts as ready once Temporal sees it polling its task queue."""
    done = _temporal(temporal_bin, cfg, "task-queue", "describe", "--task-queue", task_queue, "-o", "json")
    if isinstance(done, str):
        return done
    if done.returncode != 0:
        return "task-queue describe failed"
    try:
        pollers = json.loads(done.stdout).get("pollers") or []
    except ValueError:
        return "task-queue describe answered no JSON"
    return None if pollers else f"no worker polls {task_queue} yet"


def _get(url: str) -> httpx.Response | str:
    """The response, or why there is none."""
    try:
        return httpx.get(url, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        return f"{url}: {type(exc).__name__}"


def http_answers(url: str) -> str | None:
    r = _get(url)
    return r if isinstance(r, str) else None


def http_ok(url: str) -> str | None:
    """The URL answers 200 (Prometheus's /-/ready answers 503 until it has loaded its TSDB)."""
    r = _get(url)
    if isinstance(r, str):
        return r
    return None if r.status_code == 200 else f"{url} answered {r.status_code}"


def deployments_ready(region: RegionConfig) -> str | None:
    """Every track Deployment in the region's namespace has readyReplicas == spec.replicas."""
    assert region.kube.api_url
    url = f"{region.kube.api_url.rstrip('/')}/apis/apps/v1/namespaces/{region.kube.namespace}/deployments"
    r = _get(url)
    if isinstance(r, str):
        return r
    if r.status_code != 200:
        return f"{url} answered {r.status_code}"
    items = [d for d in r.json().get("items", []) if "drctl.io/track" in (d["metadata"].get("labels") or {})]
    if not items:
        return "no track Deployments yet"
    for d in items:
        want = d.get("spec", {}).get("replicas", 1)
        ready = (d.get("status") or {}).get("readyReplicas") or 0
        if ready != want:
            return f"Deployment {d['metadata']['name']}: readyReplicas {ready}/{want}"
    return None


def region_ready(region: RegionConfig, cfg: FleetConfig) -> str | None:
    assert region.kube.api_url
    for check in (
        lambda: http_ok(f"{region.kube.api_url.rstrip('/')}/version"),  # type: ignore[union-attr]
        lambda: (
            http_ok(f"{region.devstack_admin_url.rstrip('/')}/replicas")
            if region.devstack_admin_url
            else None
        ),
        lambda: deployments_ready(region),
        lambda: answers_completion(region.gateway_url, cfg),
    ):
        reason = check()
        if reason:
            return reason
    return None
