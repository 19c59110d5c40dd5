"""A tiny Prometheus text-format parser: the vLLM gauges the probe reads, and the counters and
histograms of passive signals."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from drctl.models.passive import HistogramSnapshot

# name{labels} value [timestamp]; label values may hold spaces and escaped quotes.
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)')


def _samples(text: str) -> Iterator[tuple[re.Match[str], float]]:
    """Each sample line's match and value; comments, unparsable lines and NaN are skipped."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if not math.isnan(value):
            yield m, value


def parse_samples(text: str) -> dict[str, float]:
    """Sum samples per metric name across label sets (one vLLM server exposes one model).

    Unparseable lines and non-finite values are skipped: a probe must read what it can from a
    half-broken /metrics page rather than fail on it.
    """
    out: dict[str, float] = {}
    for m, value in _samples(text):
        if not math.isinf(value):
            out[m.group(1)] = out.get(m.group(1), 0.0) + value
    return out


VLLM_WAITING = "vllm:num_requests_waiting"
VLLM_RUNNING = "vllm:num_requests_running"
# KV-cache fill (0..1). The V1 engine (vllm/v1/metrics/loggers.py) names it kv_cache_usage_perc,
# one series per engine (labels model_name, engine); the V0 engine named it gpu_cache_usage_perc.
VLLM_KV_CACHE = "vllm:kv_cache_usage_perc"
VLLM_KV_CACHE_V0 = "vllm:gpu_cache_usage_perc"
VLLM_GAUGES = (VLLM_WAITING, VLLM_RUNNING, VLLM_KV_CACHE, VLLM_KV_CACHE_V0)


def vllm_gauges(text: str) -> dict[str, float]:
    """The probe's vLLM gauges (and finished requests) from a /metrics page of either engine generation.

    Queue, running and finished are summed over engines and labels (a data-parallel server has several); KV-cache usage
    is the fullest engine's, a fill and not a count, under VLLM_KV_CACHE whichever name it came as.
    """
    out: dict[str, float] = {}
    usage: dict[str, float] = {}
    for m, value in _samples(text):
        name = m.group(1)
        if math.isinf(value) or name not in VLLM_PROBED:
            continue
        if name in (VLLM_KV_CACHE, VLLM_KV_CACHE_V0):
            usage[name] = max(usage[name], value) if name in usage else value
        else:
            out[name] = out.get(name, 0.0) + value
    kv = usage.get(VLLM_KV_CACHE, usage.get(VLLM_KV_CACHE_V0))
    if kv is not None:
        out[VLLM_KV_CACHE] = kv
    return out


_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], value)


Series = list[tuple[str, dict[str, str], float]]  # (name, labels, value) per sample


def parse_series(text: str) -> Series:
    """Every sample with its labels: (name, labels, value). NaN and unparsable lines are skipped.

    +Inf is kept here (a histogram's last `le` label is "+Inf", and a gauge may be infinite).
    """
    return [
        (m.group(1), {k: _unescape(v) for k, v in _LABEL.findall(m.group(2) or "")}, value)
        for m, value in _samples(text)
    ]


def histogram(series: list[tuple[str, dict[str, str], float]], name: str) -> HistogramSnapshot | None:
    """The histogram `name`, summed over its label sets (one vLLM server serves one model); None if absent."""
    buckets: dict[float, float] = {}
    count = total = 0.0
    seen = False
    for metric, labels, value in series:
        if metric == f"{name}_bucket" and "le" in labels:
            try:
                le = float(labels["le"])
            except ValueError:
                continue
            if not math.isinf(le):  # the +Inf bucket is _count
                buckets[le] = buckets.get(le, 0.0) + value
        elif metric == f"{name}_count":
            count += value
            seen = True
        elif metric == f"{name}_sum":
            total += value
    if not seen:
        return None
    return HistogramSnapshot(buckets=sorted(buckets.items()), count=count, sum=total)


def total(series: list[tuple[str, dict[str, str], float]], name: str, **match: str) -> float | None:
    """Sum of `name` over the label sets that carry every `match` label value; None if none does."""
    values = [v for n, labels, v in series if n == name and all(labels.get(k) == w for k, w in match.items())]
    return sum(values) if values else None


VLLM_TTFT = "vllm:time_to_first_token_seconds"
VLLM_E2E = "vllm:e2e_request_latency_seconds"
VLLM_SUCCESS = "vllm:request_success_total"
# What a probe reads from /metrics: the gauges, and the finished-requests counter (progress: a
# saturated server still finishes requests, a hung one does not).
VLLM_PROBED = (*VLLM_GAUGES, VLLM_SUCCESS)
# vLLM's API server counts every HTTP request through prometheus-fastapi-instrumentator:
# http_requests_total{handler, method, status}, the status grouped as "2xx".."5xx".
HTTP_REQUESTS = "http_requests_total"
