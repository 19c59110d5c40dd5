"""A tiny Prometheus text-format parser, enough for the vLLM gauges the probe reads."""

from __future__ import annotations

import math
import re

# name{labels} value [timestamp]; label values may hold spaces and escaped quotes.
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)')


def parse_samples(text: str) -> dict[str, float]:
    """Sum samples per metric name across label sets (one vLLM server exposes one model).

    Unparseable lines and non-finite values are skipped: a probe must read what it can from a
    half-broken /metrics page rather than fail on it.
    """
    out: dict[str, float] = {}
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
        if math.isnan(value) or math.isinf(value):
            continue
        out[m.group(1)] = out.get(m.group(1), 0.0) + value
    return out


VLLM_WAITING = "vllm:num_requests_waiting"
VLLM_RUNNING = "vllm:num_requests_running"
VLLM_KV_CACHE = "vllm:gpu_cache_usage_perc"
