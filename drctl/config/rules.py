"""Cross-field rules of a fleet config: two settings that must not point at one thing.

Each rule returns (field path, message) pairs, so `drctl config validate` reports every clash at
the field that makes it, naming the field it clashes with. Every rule is one pass over the config
with a dict keyed by what must be unique, so judging 100,000 regions or webhooks stays linear.

- No two regions share a gateway (compared as one URL reader sees it: scheme, lowercase ASCII host,
  port with its default, path), a Kubernetes API and namespace, a Route 53 set identifier or a task
  queue: one region's failover, drill or activities would act on the other's.
- Nothing restores into `kube-system`, `kube-public`, `kube-node-lease`, Velero's own namespace or
  the namespace the drctl worker runs in (`worker.namespace`): Velero runs with cluster-admin
  rights there, and a restored object could take over the cluster or drctl itself.
- One environment variable or file fills one secret role: the inference bearer token is sent to
  every gateway, so if it were also the codec keys, the keys would be too.
- `secret_dirs` are absolute and not `/` or a system directory (secret_paths.py).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from drctl.config.urls import UrlRefused, ascii_host, parse_http_url

if TYPE_CHECKING:
    from drctl.config.schema import FleetConfig, KubeConfig

Problem = tuple[str, str]
# Namespaces no restore may write: the control plane's own, and those of a cluster-admin service.
CLUSTER_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")


def url_key(raw: str) -> str:
    """A URL as one reader sees it: scheme, lowercase ASCII (IDNA) host, port with its default, path.

    httpx shows an internationalised host decoded and urllib keeps it in punycode; the key uses the
    ASCII form either way, so `http://xn--bcher-kva.example/` and its decoded twin are one gateway.
    """
    try:
        url = parse_http_url(raw)
    except UrlRefused:
        return raw  # already refused at its own field; compared as written
    host = ascii_host(url.raw_host.decode("ascii"))
    if ":" in host:  # an IPv6 address has many spellings: ::1 is 0:0::1
        host = f"[{ipaddress.IPv6Address(host).compressed}]"
    port = url.port or (443 if url.scheme == "https" else 80)
    path = url.raw_path.decode("ascii").split("?", 1)[0].rstrip("/") or "/"
    return f"{url.scheme}://{host}:{port}{path}"


def _clashes(items: Iterable[tuple[str, object]], what: str, hint: str = "") -> Iterator[Problem]:
    """(path, key) pairs: one problem for each path whose key an earlier path already has."""
    first: dict[object, str] = {}
    for path, key in items:
        if key in first:
            yield path, f"same {what} as {first[key]}{hint}"
        else:
            first[key] = path


def _kube_key(kube: KubeConfig) -> tuple[str, ...]:
    """Which Kubernetes API a region's kube settings reach (before the namespace)."""
    if kube.api_url:
        return ("api", url_key(kube.api_url))
    if kube.in_cluster:
        return ("in-cluster",)
    # A context of one kubeconfig; no context is the kubeconfig's current one.
    where = os.path.realpath(kube.kubeconfig_path) if kube.kubeconfig_path else ""
    return ("kubeconfig", where, kube.context or "")


def region_clashes(cfg: FleetConfig) -> list[Problem]:
    """Regions that share a gateway, a Kubernetes API and namespace, a set identifier or a queue."""
    regions = list(enumerate(cfg.regions))
    out = list(
        _clashes(((f"regions[{i}].gateway_url", url_key(r.gateway_url)) for i, r in regions), "gateway")
    )
    out += _clashes(
        ((f"regions[{i}].kube", (*_kube_key(r.kube), r.kube.namespace)) for i, r in regions),
        "Kubernetes API and namespace",
    )
    out += _clashes(
        ((f"regions[{i}].route53_set_identifier", r.set_identifier) for i, r in regions),
        "Route 53 set identifier",
        " (a region's default is its name)",
    )
    queues = [("temporal.task_queue", cfg.temporal.task_queue)]
    queues += [(f"regions[{i}].task_queue", r.queue) for i, r in regions]
    out += _clashes(queues, "task queue", " (a region's default is drctl-<region>)")
    return out


def restore_clashes(cfg: FleetConfig) -> list[Problem]:
    """Namespaces a restore may write that belong to the cluster, Velero or drctl itself."""
    forbidden = {n: "a Kubernetes system namespace" for n in CLUSTER_NAMESPACES}
    forbidden[cfg.backup.namespace] = "Velero's own namespace (backup.namespace)"
    forbidden[cfg.worker.namespace] = "the namespace drctl runs in (worker.namespace)"
    out = [
        (f"backup.restore_namespaces[{i}]", f"{n!r} is {forbidden[n]}: no restore may write into it")
        for i, n in enumerate(cfg.backup.restore_namespaces)
        if n in forbidden
    ]
    # A region's workload namespace is a restore target too (FleetConfig.restore_namespaces).
    out += [
        (
            f"regions[{i}].kube.namespace",
            f"{r.kube.namespace!r} is {forbidden[r.kube.namespace]}: restores write here",
        )
        for i, r in enumerate(cfg.regions)
        if r.kube.namespace in forbidden
    ]
    return out


def secret_roles(cfg: FleetConfig) -> list[tuple[str, str, str]]:
    """(field path, role, source) of every secret the config names; source is `env NAME` or `file PATH`."""
    rows: list[tuple[str, str, str]] = []

    def add(path: str, role: str, env: str | None = None, file: str | None = None) -> None:
        if env:
            rows.append((path, role, f"environment variable {env}"))
        if file:
            # One file however it is spelled (a symlink, `..`); a path is free text: shown escaped.
            rows.append((path, role, f"file {os.path.realpath(file)!r}"))

    auth = cfg.workload.auth
    if auth:
        add("workload.auth", "the inference bearer token", auth.token_env, auth.token_file)
    t = cfg.temporal
    if t.codec:
        add("temporal.codec", "the payload codec keys", t.codec.keys_env, t.codec.keys_file)
    add("temporal.api_key_env", "the Temporal API key", t.api_key_env)
    if t.tls:
        add("temporal.tls.client_key_path", "the Temporal client key", file=t.tls.client_key_path)
    for i, w in enumerate(cfg.notifications.webhooks):
        add(f"notifications.webhooks[{i}].url_env", "a webhook URL", w.url_env)
        add(f"notifications.webhooks[{i}]", "a PagerDuty routing key", w.routing_key_env, w.routing_key_file)
    for region, ep in sorted(cfg.data.endpoints.items()):
        where = f"data.endpoints.{region}"
        add(f"{where}.access_key_id_env", "an S3 access key id", ep.access_key_id_env)
        add(f"{where}.secret_access_key_env", "an S3 secret access key", ep.secret_access_key_env)
        add(f"{where}.session_token_env", "an S3 session token", ep.session_token_env)
    for i, r in enumerate(cfg.regions):
        add(f"regions[{i}].kube.kubeconfig_path", "a kubeconfig", file=r.kube.kubeconfig_path)
    return rows


def shared_secrets(cfg: FleetConfig) -> list[Problem]:
    """A variable or file that fills two secret roles, or that an experiment may read.

    Several fields of one role may share a source (two webhooks one PagerDuty key, two regions one
    kubeconfig with different contexts); two roles may not, and `drills.allowed_env` names only
    variables no secret role uses, since an experiment's configuration can read and send them.
    """
    role_of: dict[str, tuple[str, str]] = {}
    out: list[Problem] = []
    for path, role, source in secret_roles(cfg):
        seen = role_of.setdefault(source, (role, path))
        if seen[0] != role:
            out.append((path, f"{source} is already {seen[0]} ({seen[1]}): one secret, one role"))
    for i, name in enumerate(cfg.drills.allowed_env):
        held = role_of.get(f"environment variable {name}")
        if held is not None:
            out.append(
                (
                    f"drills.allowed_env[{i}]",
                    f"{name} holds {held[0]} ({held[1]}): experiments may not read it",
                )
            )
    return out


def all_problems(cfg: FleetConfig) -> list[Problem]:
    return region_clashes(cfg) + restore_clashes(cfg) + shared_secrets(cfg)
