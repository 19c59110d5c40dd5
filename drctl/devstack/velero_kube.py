"""What the dev-stack Velero agent and its controllers share: paths of the emulated Kubernetes API,
its error, and the kinds a backup holds."""

from __future__ import annotations

from datetime import UTC, datetime

# (group, version, plural, kind): what a backup of the inference namespace holds in the dev stack.
RESOURCES: list[tuple[str, str, str, str]] = [
    ("apps", "v1", "deployments", "Deployment"),
    ("", "v1", "services", "Service"),
    ("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    ("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute"),
]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def api_path(group: str, version: str, plural: str, ns: str | None = None, name: str | None = None) -> str:
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    out = base + (f"/namespaces/{ns}" if ns else "") + f"/{plural}"
    return out + (f"/{name}" if name else "")


class KubeError(RuntimeError):
    """A non-2xx answer of the emulated API; `status` is its HTTP code."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:200]}")
        self.status = status
