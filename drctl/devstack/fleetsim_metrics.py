"""fleetsim's engine statistics, rendered as Prometheus text under vLLM's metric names.

The drctl probe reads these exactly as it would read a real vLLM server's /metrics, so the names,
the labels and the TTFT histogram buckets follow vLLM. Two surfaces, one at a time, as a real
server exposes one (FLEETSIM_VLLM_METRICS):
- "v1", vLLM today (vllm/v1/metrics/loggers.py): labels model_name and engine, KV-cache fill as
  `vllm:kv_cache_usage_perc`;
- "v0", the V0 engine (vllm/engine/metrics.py) as vLLM v0.6.3 exports it: label model_name only,
  KV-cache fill as `vllm:gpu_cache_usage_perc`, and no `http_requests_total` (its API server had no
  HTTP instrumentator; vLLM PR 15657 added one in 2025), so errors are not counted anywhere.
Rendering is done by hand instead of through prometheus_client to keep replica start-up cheap.

`vllm:cache_config_info` is vLLM's info gauge of its CacheConfig (loggers.py `log_metrics_info`,
labels from `CacheConfig.metrics_info()`, vllm/config/cache.py). max_num_seqs is a SchedulerConfig
field, so vLLM does not show it there, and neither does fleetsim: what a capacity model can read is
num_gpu_blocks, block_size and kv_cache_max_concurrency (requests of max_model_len the KV cache
holds at once), which fleetsim sizes so that its KV cache holds exactly max_num_seqs sequences.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

# vLLM's bucket edges for vllm:time_to_first_token_seconds (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip

# vLLM's bucket edges for vllm:e2e_request_latency_seconds (request_latency_buckets, same file).
E2E_BUCKETS_S: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

# vLLM's CacheConfig.DEFAULT_BLOCK_SIZE: tokens per KV-cache block.
BLOCK_SIZE = 16

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SURFACES = ("v0", "v1")
_KV_CACHE = {"v0": "vllm:gpu_cache_usage_perc", "v1": "vllm:kv_cache_usage_perc"}


@dataclass
class Histogram:
    """A cumulative-on-render histogram: counts are kept per bucket, summed when rendered."""

    edges: tuple[float, ...] = TTFT_BUCKETS_S
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        # One slot per finite edge plus the +Inf overflow slot.
        self.counts = [0] * (len(self.edges) + 1)

    def observe(self, value: float) -> None:
        # bisect_left puts a value equal to an edge into that edge's bucket (Prometheus `le`).
        self.counts[bisect_left(self.edges, value)] += 1
        self.total += value
        self.count += 1


@dataclass
class EngineStats:
    """Live counters of one fleetsim replica; the request handlers update them in place."""

    model: str
    max_num_seqs: int
    max_model_len: int = 2048
    running: int = 0
    waiting: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    success_by_reason: dict[str, int] = field(default_factory=dict)
    ttft: Histogram = field(default_factory=Histogram)
    e2e: Histogram = field(default_factory=lambda: Histogram(edges=E2E_BUCKETS_S))
    # vllm:request_queue_time_seconds: time in the WAITING phase (vLLM uses the e2e buckets for it).
    queue_time: Histogram = field(default_factory=lambda: Histogram(edges=E2E_BUCKETS_S))
    # (handler, method, status class such as "5xx") -> count, as prometheus-fastapi-instrumentator
    # labels http_requests_total in vLLM's API server (status codes grouped by default).
    http_requests: dict[tuple[str, str, str], int] = field(default_factory=dict)

    @property
    def cache_usage(self) -> float:
        """KV-cache fill as vLLM reports it (0..1): here one slot per running sequence."""
        return min(1.0, self.running / self.max_num_seqs)

    @property
    def num_gpu_blocks(self) -> int:
        """KV-cache blocks: max_num_seqs sequences of max_model_len tokens."""
        return self.max_num_seqs * -(-self.max_model_len // BLOCK_SIZE)

    def cache_config_labels(self) -> dict[str, str]:
        """The labels vLLM puts on vllm:cache_config_info (a subset of CacheConfig's fields)."""
        blocks = self.num_gpu_blocks
        return {
            "block_size": str(BLOCK_SIZE),
            "cache_dtype": "auto",
            "enable_prefix_caching": "True",
            "gpu_memory_utilization": "0.92",
            "num_cpu_blocks": "0",
            "num_gpu_blocks": str(blocks),
            "num_gpu_blocks_override": "None",
            "kv_cache_size_tokens": str(blocks * BLOCK_SIZE),
            "kv_cache_max_concurrency": repr(float(blocks * BLOCK_SIZE / self.max_model_len)),
        }

    def record_success(self, finish_reason: str) -> None:
        self.success_by_reason[finish_reason] = self.success_by_reason.get(finish_reason, 0) + 1

    def record_http(self, handler: str, method: str, status: int) -> None:
        key = (handler, method, f"{status // 100}xx")
        self.http_requests[key] = self.http_requests.get(key, 0) + 1


def _fmt(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(stats: EngineStats, surface: str = "v1") -> str:
    """The Prometheus text exposition (format 0.0.4) of `stats`, as vLLM `surface` names it."""
    label = f'model_name="{_escape(stats.model)}"'
    if surface == "v1":
        label = f'engine="0",{label}'  # one engine core per replica (no data parallelism)
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for suffix, extra, value in samples:
            labels = label + (f",{extra}" if extra else "")
            lines.append(f"{name}{suffix}{{{labels}}} {_fmt(value)}")

    scalars: tuple[tuple[str, str, str, float], ...] = (
        ("vllm:num_requests_running", "gauge", "Requests in model execution batches.", stats.running),
        ("vllm:num_requests_waiting", "gauge", "Requests waiting to be scheduled.", stats.waiting),
        (_KV_CACHE[surface], "gauge", "KV-cache usage. 1 means 100 percent usage.", stats.cache_usage),
        ("vllm:prompt_tokens_total", "counter", "Prefill tokens processed.", stats.prompt_tokens),
        ("vllm:generation_tokens_total", "counter", "Generation tokens processed.", stats.generation_tokens),
    )
    for name, kind, help_text, value in scalars:
        metric(name, kind, help_text, [("", "", value)])
    reasons = sorted(stats.success_by_reason.items()) or [("length", 0)]
    success = [("", f'finished_reason="{_escape(r)}"', float(n)) for r, n in reasons]
    metric("vllm:request_success_total", "counter", "Successfully processed requests.", success)

    for name, help_text, hist in (
        ("vllm:time_to_first_token_seconds", "Time to first token in seconds.", stats.ttft),
        ("vllm:e2e_request_latency_seconds", "End-to-end request latency in seconds.", stats.e2e),
        ("vllm:request_queue_time_seconds", "Time spent in WAITING phase for request.", stats.queue_time),
    ):
        buckets: list[tuple[str, str, float]] = []
        cumulative = 0
        for edge, n in zip((*hist.edges, float("inf")), hist.counts, strict=True):
            cumulative += n
            buckets.append(("_bucket", f'le="{_fmt(edge)}"', cumulative))
        buckets += [("_sum", "", hist.total), ("_count", "", hist.count)]
        metric(name, "histogram", help_text, buckets)
    # An info gauge: always 1, the facts are its labels. No model_name; V1 adds `engine` (loggers.py
    # log_metrics_info sets metrics_info["engine"] per engine index), V0 has the config keys only.
    cache_labels = stats.cache_config_labels() | ({"engine": "0"} if surface == "v1" else {})
    info = ",".join(f'{k}="{_escape(v)}"' for k, v in cache_labels.items())
    lines.append("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig")
    lines.append("# TYPE vllm:cache_config_info gauge")
    lines.append(f"vllm:cache_config_info{{{info}}} 1.0")
    if surface == "v0":
        # vLLM v0.6.3 (the V0 engine's last surface drctl names) has no HTTP instrumentator: the
        # request counter came with vLLM PR 15657 (2025), so failures show nowhere on this surface.
        return "\n".join(lines) + "\n"
    # Not a vllm: metric, so without the model_name label, as the instrumentator renders it.
    lines.append("# HELP http_requests_total Total number of requests by method, status and handler.")
    lines.append("# TYPE http_requests_total counter")
    for (handler, method, status), n in sorted(stats.http_requests.items()):
        lines.append(
            f'http_requests_total{{handler="{_escape(handler)}",method="{method}",status="{status}"}} '
            f"{_fmt(n)}"
        )
    return "\n".join(lines) + "\n"
