"""Provider-test fixtures: `cluster` and `platform`, the emulated Kubernetes API (tests/providers/kube_cluster.py)."""

from tests.providers.kube_cluster import cluster, platform

__all__ = ["cluster", "platform"]
