"""How drctl reaches a region's Kubernetes API: one ApiClient per region, built from its `kube` config.

Three sources, as kubectl and client-go resolve them:
- `api_url`: a bare URL (the dev stack's emulated clusters);
- the pod's service account (`in_cluster: true`, or nothing set while running in a pod): the token
  file is re-read as the kubelet rotates it, so a long-lived worker never holds an expired token;
- a kubeconfig context: certificates, tokens, or an exec plugin such as `aws eks get-token`, which the
  client runs again whenever the credential it returned expires.
"""

from __future__ import annotations

import os

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException
from urllib3.util.retry import Retry

from drctl.config.schema import KubeConfig

# Set by the kubelet in every pod; client-go's in-cluster detection keys on the same variable.
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"


class KubeCredentialsError(RuntimeError):
    """The configured way to reach a cluster cannot be used here."""


# urllib3 would retry a read timeout 3 times inside one call, so a stalled list or watch took 4 × the
# read timeout, longer than the activity's start-to-close: the operator then saw an activity timeout
# instead of the call that hung. Only connects are retried here; the activity's retry policy retries
# the rest, with backoff, and every attempt ends within one read timeout with the call named.
CLIENT_RETRIES = Retry(total=2, connect=2, read=0, status=0, redirect=0)


def _client(conf: client.Configuration) -> client.ApiClient:
    conf.retries = CLIENT_RETRIES
    return client.ApiClient(conf)


def uses_in_cluster(kube: KubeConfig) -> bool:
    """Whether this region's cluster is reached with the pod's own service account."""
    if kube.in_cluster:
        return True
    return not kube.api_url and not kube.context and bool(os.environ.get(IN_CLUSTER_ENV))


def api_client_for(kube: KubeConfig) -> client.ApiClient:
    """An ApiClient for one region's cluster."""
    if kube.api_url:
        return _client(client.Configuration(host=kube.api_url.rstrip("/")))
    if uses_in_cluster(kube):
        conf = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=conf)
        except ConfigException as exc:
            raise KubeCredentialsError(
                f"kube.in_cluster is set but the pod's service account is unusable: {exc} "
                f"(is this process running in a pod? {IN_CLUSTER_ENV} is "
                f"{'set' if os.environ.get(IN_CLUSTER_ENV) else 'unset'})"
            ) from exc
        return _client(conf)
    try:
        conf = client.Configuration()
        conf.retries = CLIENT_RETRIES  # set before the client builds its connection pool from it
        return config.new_client_from_config(
            config_file=kube.kubeconfig_path, context=kube.context, client_configuration=conf
        )
    except ConfigException as exc:
        where = kube.kubeconfig_path or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise KubeCredentialsError(
            f"kubeconfig {where}, context {kube.context or '(current)'}: {exc}"
        ) from exc
