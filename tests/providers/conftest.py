"""Provider-test fixtures: `cluster` and `platform`, the emulated Kubernetes API (tests/support/kube_cluster.py)."""

from tests.support.kube_cluster import cluster, platform

__all__ = ["cluster", "platform"]
