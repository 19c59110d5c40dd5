"""The resources the emulated API server serves, and the rules of the API server they share.

Kept apart from the server class (drctl/devstack/kube.py) so the watch (kube_watch.py) and the
verb handlers read one table.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from drctl.devstack import kube_schema
from drctl.devstack.label_selector import ApiError

RESOURCES: dict[str, tuple[str, bool]] = {  # "group/version/plural" -> (kind, namespaced)
    "v1/namespaces": ("Namespace", False),
    "v1/services": ("Service", True),
    "v1/configmaps": ("ConfigMap", True),
    "v1/endpoints": ("Endpoints", True),
    "v1/pods": ("Pod", True),  # the node agent's replicas (drctl/devstack/pods.py)
    "apps/v1/replicasets": ("ReplicaSet", True),
    "discovery.k8s.io/v1/endpointslices": ("EndpointSlice", True),  # the node agent publishes them
    "apps/v1/deployments": ("Deployment", True),
    "autoscaling/v2/horizontalpodautoscalers": ("HorizontalPodAutoscaler", True),
    "velero.io/v1/backups": ("Backup", True),
    "velero.io/v1/restores": ("Restore", True),
    "velero.io/v1/schedules": ("Schedule", True),
    "velero.io/v1/backupstoragelocations": ("BackupStorageLocation", True),
    "gateway.networking.k8s.io/v1/httproutes": ("HTTPRoute", True),
}
# Built-in kinds with a status subresource: writes to the main endpoint keep the stored status, and
# /status writes keep everything else, so a client replacing a Deployment never clobbers what the
# node agent reported. Custom resources have one when their CRD says so (HTTPRoute does, Velero's
# Backup and Restore do not).
STATUS_SUBRESOURCE = {
    "deployments",
    "replicasets",
    "pods",
    "horizontalpodautoscalers",
    "services",
    "namespaces",
}
NAMESPACE_PATH = re.compile(r"/api/v1/namespaces(?:/([^/]+))?/?")
VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}


def split_key(key: str) -> tuple[str, str, str]:
    parts = key.split("/")
    return ("", parts[0], parts[1]) if len(parts) == 2 else (parts[0], parts[1], parts[2])


def api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def now(after_s: float = 0.0) -> str:
    at = datetime.datetime.now(tz=datetime.UTC) + datetime.timedelta(seconds=after_s)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


DELETE_RETURNS_OBJECT = {"services", "pods"}
# metadata the server owns: a create drops the client's values, an update keeps the stored ones.
SERVER_META = (
    "uid",
    "creationTimestamp",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)


def has_status(key: str) -> bool:
    group, version, plural = split_key(key)
    kind = RESOURCES[key][0]
    crd = kube_schema.status_subresource(api_version(group, version), kind)
    return plural in STATUS_SUBRESOURCE if crd is None else crd


def field_validation_of(params: Any) -> str:
    value = params.get("fieldValidation", "") or "Warn"
    if value not in ("Strict", "Warn", "Ignore"):
        raise ApiError(
            400, "BadRequest", f'fieldValidation must be one of Strict, Warn, Ignore, not "{value}"'
        )
    return value


def check_version(key: str, name: str, body: dict[str, Any], current: dict[str, Any]) -> None:
    """409 for a write that names a resourceVersion other than the stored one (optimistic concurrency)."""
    rv = (body.get("metadata") or {}).get("resourceVersion")
    if rv and rv != current["metadata"].get("resourceVersion"):
        group, _, plural = split_key(key)
        resource = f"{plural}.{group}" if group else plural
        raise ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again",
        )


def grace_period_of(params: Any, body: Any) -> int | None:
    """A DELETE's gracePeriodSeconds, from the query or the DeleteOptions body; None if not given."""
    value = params.get("gracePeriodSeconds")
    if value in (None, "") and isinstance(body, dict):
        value = body.get("gracePeriodSeconds")
    if value in (None, ""):
        return None
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        raise ApiError(400, "BadRequest", f"gracePeriodSeconds must be an integer, not {value!r}") from None
