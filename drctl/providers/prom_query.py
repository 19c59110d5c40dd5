"""Passive signals from Prometheus (production): instant queries over the vLLM series, per region.

Prometheus already holds every replica's counters, so one query per figure replaces a scrape of
every replica: `increase()` over the window gives requests and 5xx answers, and
`histogram_quantile()` over `rate()` of the bucket series gives TTFT p50/p99. The region is a
label on the series (health.passive.prometheus.region_label), set by relabelling or
external_labels. A window needs two samples per series, so the scrape interval must be at most
half of window_s. Freshness is measured on Prometheus's own clock (`time() - timestamp(...)`), so
a skewed worker clock cannot make old data look fresh.

The API is the documented one: GET /api/v1/query answers {"status": "success", "data":
{"resultType": "vector", "result": [{"metric": {...}, "value": [ts, "v"]}]}}, or "status": "error"
with "errorType" and "error".
"""

from __future__ import annotations

import math
from typing import Any

import httpx

from drctl.models.passive import PassiveThresholds, PassiveVerdict, WindowStats, judge
from drctl.providers.prom import HTTP_REQUESTS, VLLM_E2E, VLLM_RUNNING, VLLM_SUCCESS, VLLM_TTFT
from drctl.providers.vllm_metrics import GENERATION_HANDLERS


class PrometheusQueryError(RuntimeError):
    """Prometheus could not be reached, or refused a query; the message names which and why."""


def _matchers(*parts: str) -> str:
    return "{" + ",".join(p for p in parts if p) + "}"


def region_queries(window_s: float, label: str, selector: str = "") -> dict[str, str]:
    """The PromQL of every figure, each `by (label)` so one answer covers all regions."""
    w = f"[{window_s:g}s]"
    handlers = f'handler=~"{"|".join(sorted(GENERATION_HANDLERS))}"'
    http = _matchers(handlers, selector)
    http_5xx = _matchers(handlers, 'status=~"5.*"', selector)
    sel = _matchers(selector)

    def q(quantile: float, name: str) -> str:
        return f"histogram_quantile({quantile:g}, sum by ({label}, le) (rate({name}_bucket{sel}{w})))"

    return {
        "requests": f"sum by ({label}) (increase({HTTP_REQUESTS}{http}{w}))",
        "errors": f"sum by ({label}) (increase({HTTP_REQUESTS}{http_5xx}{w}))",
        # Requests where no http_requests_total is exported (vLLM before 2025): the successes.
        "successes": f"sum by ({label}) (increase({VLLM_SUCCESS}{sel}{w}))",
        "ttft_p50": q(0.5, VLLM_TTFT),
        "ttft_p99": q(0.99, VLLM_TTFT),
        "e2e_p99": q(0.99, VLLM_E2E),
        # vLLM V1 exports one series per engine (label `engine`); a replica is one series once
        # the engines are summed away (a no-op on V0, which has no such label).
        "replicas": f"count by ({label}) (sum without (engine) ({VLLM_RUNNING}{sel}))",
        "age_s": f"time() - max by ({label}) (timestamp({VLLM_RUNNING}{sel}))",
    }


def _value(sample: dict[str, Any]) -> float | None:
    try:
        v = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return None if math.isnan(v) or math.isinf(v) else v


class PrometheusSignals:
    """Reads the passive figures of every region from one Prometheus (or a compatible API)."""

    def __init__(
        self,
        url: str,
        *,
        region_label: str = "region",
        selector: str = "",
        timeout_s: float = 2.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.label = region_label
        self.selector = selector
        self.timeout_s = timeout_s
        self._client = client or httpx.Client(timeout=timeout_s, trust_env=False)

    def close(self) -> None:
        self._client.close()

    def query(self, promql: str) -> list[dict[str, Any]]:
        """One instant query: the result vector. Raises PrometheusQueryError."""
        try:
            resp = self._client.get(
                f"{self.url}/api/v1/query", params={"query": promql}, timeout=self.timeout_s
            )
            body = resp.json()
        except httpx.HTTPError as exc:
            raise PrometheusQueryError(
                f"Prometheus at {self.url} unreachable: {type(exc).__name__}: {exc}"
            ) from exc
        except ValueError as exc:
            raise PrometheusQueryError(
                f"Prometheus at {self.url} answered HTTP {resp.status_code}, not JSON"
            ) from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            why = body.get("error", body) if isinstance(body, dict) else body
            kind = body.get("errorType", "?") if isinstance(body, dict) else "?"
            raise PrometheusQueryError(f"Prometheus at {self.url} refused {promql!r}: {kind}: {why}")
        data = body.get("data") or {}
        if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            raise PrometheusQueryError(
                f"Prometheus at {self.url}: {promql!r} gave {data.get('resultType')!r}, not an instant vector"
            )
        return data["result"]

    def figures(self, window_s: float) -> dict[str, dict[str, float]]:
        """figure -> region -> value, for every figure of `region_queries`."""
        out: dict[str, dict[str, float]] = {}
        for name, promql in region_queries(window_s, self.label, self.selector).items():
            out[name] = {}
            for sample in self.query(promql):
                region = (sample.get("metric") or {}).get(self.label)
                if region is not None and (v := _value(sample)) is not None:
                    out[name][region] = v
        return out

    def verdicts(self, regions: list[str], th: PassiveThresholds) -> list[PassiveVerdict]:
        """A verdict per region; a region Prometheus has no fresh vLLM series for is MISSING."""
        f = self.figures(th.window_s)
        out = []
        for r in regions:
            age = f["age_s"].get(r)
            if age is None or age > th.max_age_s:
                seen = "no vLLM series" if age is None else f"newest sample {age:.1f}s old"
                out.append(judge(r, [], [f"prometheus ({seen})"], th))
                continue

            def ms(key: str, region: str = r) -> float | None:
                v = f[key].get(region)
                return None if v is None else v * 1000.0

            counted = r in f["requests"]
            view = WindowStats(
                kind="prometheus",
                span_s=th.window_s,
                sources=int(f["replicas"].get(r, 0)),
                # No 5xx series beside a request series is no 5xx; with no request series the replicas
                # export no http_requests_total (vLLM before 2025): the successes are the requests
                # known, and errors are unknown, never 0.
                requests=f["requests"][r] if counted else f["successes"].get(r, 0.0),
                errors=f["errors"].get(r, 0.0) if counted else None,
                ttft_p50_ms=ms("ttft_p50"),
                ttft_p99_ms=ms("ttft_p99"),
                e2e_p99_ms=ms("e2e_p99"),
            )
            out.append(judge(r, [view], [], th))
        return out
