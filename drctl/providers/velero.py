"""Velero backup provider: Backup and Restore objects (velero.io/v1) through the Kubernetes API.

drctl never talks to the object store itself: it asks the region's Velero for a Backup or a
Restore and waits for a terminal phase, judged by one explicit policy (`judge_phase`).

Velero's restore controller looks a Restore's Backup up in its own cluster and fails validation when
it is not there; a backup taken by another cluster appears only once backup sync has imported it
(every `--backup-sync-period`, 1 min by default). So a restore first waits, bounded by
`backup.sync_timeout_s`, until this cluster lists the backup (`wait_known`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from drctl.config.schema import FleetConfig
from drctl.models.backup import (
    BACKUP_FAILED_PHASES,
    BACKUP_OK,
    PARTIALLY_FAILED,
    REGION_LABEL,
    SCHEDULE_LABEL,
    TERMINAL_PHASES,
    BackupInfo,
    BackupRequest,
    RestoreRequest,
    restore_scope,
)
from drctl.providers.errors import ErrorClass, ProviderError, classify
from drctl.providers.kube_objects import STRICT
from drctl.providers.kubernetes import REQUEST_TIMEOUT
from drctl.providers.kubernetes import api_client_for as kube_api_client

GROUP = "velero.io"
VERSION = "v1"


class BackupFailed(ProviderError):
    """A Backup or Restore reached a phase the policy does not accept. Not retryable: the same
    request against the same cluster fails the same way, and the workflow must stop changing things."""

    def __init__(self, info: BackupInfo, why: str) -> None:
        self.info = info
        super().__init__(ErrorClass(kind=f"{info.kind}Failed", retryable=False, message=why))


class BackupNotSynced(ProviderError):
    """The target cluster's Velero did not list the backup in time: a restore would fail validation.
    Not retryable here: the wait already covered the sync periods the config allows for."""

    def __init__(self, info: BackupInfo, timeout_s: float) -> None:
        self.info = info
        seen = f"still {info.phase or 'New'} there" if info.phase != "absent" else "not listed there"
        msg = (
            f"backup {info.name} not known to {info.region}'s Velero after waiting {timeout_s:g}s for "
            f"backup sync ({seen}); raise backup.sync_timeout_s to 2 x the cluster's --backup-sync-period"
        )
        super().__init__(ErrorClass(kind="BackupNotSynced", retryable=False, message=msg))


class BackupTimeout(ProviderError):
    def __init__(self, info: BackupInfo, timeout_s: float) -> None:
        self.info = info
        msg = f"{info.kind.lower()} {info.name} still {info.phase or 'New'} after {timeout_s:g}s"
        super().__init__(ErrorClass(kind=f"{info.kind}Timeout", retryable=False, message=msg))


def judge_phase(info: BackupInfo, partially_failed_ok: bool) -> str | None:
    """None when `info` is acceptable, else why not. Raises nothing; only terminal phases count."""
    if info.phase == BACKUP_OK:
        return None
    if info.phase == PARTIALLY_FAILED and partially_failed_ok:
        return None
    what = f"{info.kind.lower()} {info.name} in {info.region}"
    detail = info.failure_reason or (f"{info.errors} error(s)" if info.errors else "no reason given")
    if info.phase == PARTIALLY_FAILED:
        return f"{what} PartiallyFailed ({detail}); set backup.partially_failed_ok to accept it"
    if info.phase in BACKUP_FAILED_PHASES:
        return f"{what} {info.phase}: {detail}"
    return f"{what} in phase {info.phase!r}"


def api_client_for(cfg: FleetConfig, region: str) -> k8s.ApiClient:
    """The region's ApiClient, built exactly as the platform provider builds it."""
    return kube_api_client(cfg.region(region).kube)


def _info(obj: dict[str, Any], kind: str, region: str) -> BackupInfo:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    progress = status.get("progress") or {}
    items = progress.get("itemsBackedUp" if kind == "Backup" else "itemsRestored", 0)
    reason = status.get("failureReason")
    if not reason and status.get("validationErrors"):
        reason = "; ".join(status["validationErrors"])
    return BackupInfo(
        kind=kind,  # type: ignore[arg-type]
        name=obj["metadata"]["name"],
        region=region,
        phase=status.get("phase", ""),
        backup_name=spec.get("backupName"),
        namespaces=_namespaces(spec, kind),
        items=int(items or 0),
        errors=int(status.get("errors", 0) or 0),
        warnings=int(status.get("warnings", 0) or 0),
        failure_reason=reason,
        started=status.get("startTimestamp"),
        completed=status.get("completionTimestamp"),
        expiration=status.get("expiration"),
        storage_location=spec.get("storageLocation"),
        schedule_name=labels.get(SCHEDULE_LABEL),
        origin_region=labels.get(REGION_LABEL),
    )


def _namespaces(spec: dict[str, Any], kind: str) -> list[str]:
    """A backup's namespaces; a restore's are the ones it writes (mapped, or restored in place)."""
    included = spec.get("includedNamespaces") or []
    if kind == "Backup":
        return list(included)
    mapping = spec.get("namespaceMapping") or {}
    return sorted({mapping.get(ns, ns) for ns in included}) or list(mapping.values())


class VeleroBackupProvider:
    """Backups and restores in one region's cluster."""

    def __init__(self, cfg: FleetConfig, region: str, api: k8s.ApiClient | None = None) -> None:
        self.cfg = cfg
        self.region = region
        self.settings = cfg.backup
        self.api = k8s.CustomObjectsApi(api or api_client_for(cfg, region))

    # --- Kubernetes calls --------------------------------------------------------------------

    def _call(self, action: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            # Bounded like every platform call: a hung API server must end in an error naming the
            # call, not in a wait that only the activity's heartbeat timeout notices.
            return fn(
                GROUP, VERSION, self.settings.namespace, *args, _request_timeout=REQUEST_TIMEOUT, **kwargs
            )
        except ApiException as exc:
            raise ProviderError(classify(exc, f"{action} in {self.region}")) from exc

    def _get(self, plural: str, name: str) -> dict[str, Any]:
        return self._call(f"get {plural}/{name}", self.api.get_namespaced_custom_object, plural, name)

    def _create(self, plural: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return cast(
                dict[str, Any],
                self.api.create_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    self.settings.namespace,
                    plural,
                    body,
                    field_validation=STRICT,
                    _request_timeout=REQUEST_TIMEOUT,
                ),
            )
        except ApiException as exc:
            if exc.status != 409:
                raise ProviderError(classify(exc, f"create {plural}/{name} in {self.region}")) from exc
            # A retried activity finds the object its first attempt created: keep waiting on it.
            return self._get(plural, name)

    # --- Backups -----------------------------------------------------------------------------

    def create_backup(self, req: BackupRequest) -> BackupInfo:
        body: dict[str, Any] = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Backup",
            "metadata": {
                "name": req.name,
                "namespace": self.settings.namespace,
                "labels": {"app.kubernetes.io/managed-by": "drctl", REGION_LABEL: self.region},
            },
            "spec": {
                "includedNamespaces": req.namespaces,
                "ttl": req.ttl or self.settings.ttl,
                "storageLocation": self.settings.storage_location,
            },
        }
        if req.label_selector:
            body["spec"]["labelSelector"] = {"matchLabels": dict(req.label_selector)}
        return _info(self._create("backups", req.name, body), "Backup", self.region)

    def describe_backup(self, name: str) -> BackupInfo:
        return _info(self._get("backups", name), "Backup", self.region)

    def list_backups(self) -> list[BackupInfo]:
        out = self._call("list backups", self.api.list_namespaced_custom_object, "backups")
        items = [_info(o, "Backup", self.region) for o in out.get("items", [])]
        return sorted(items, key=lambda b: b.started or "", reverse=True)

    def backup(
        self, req: BackupRequest, on_progress: Callable[[BackupInfo], None] | None = None
    ) -> BackupInfo:
        """Create a Backup and wait until the policy accepts it; raises BackupFailed otherwise."""
        self.create_backup(req)
        return self._wait("backups", "Backup", req.name, on_progress)

    # --- Restores ----------------------------------------------------------------------------

    def _allowed(self, req: RestoreRequest) -> list[str]:
        # Checked here, in the worker that calls Velero, whoever started the restore: Velero's own
        # rights are cluster-wide, so the allow-list is drctl's to keep (docs/security.md).
        allowed = self.cfg.restore_namespaces(self.region)
        outside = sorted(set(req.namespace_mapping.values()) - set(allowed))
        if outside:
            raise ProviderError(
                ErrorClass(
                    kind="Forbidden",
                    retryable=False,
                    message=f"Forbidden: restore {req.name} into namespace(s) {', '.join(outside)} refused: "
                    f"a restore into {self.region} may write only {', '.join(allowed)} "
                    "(the region's kube.namespace and backup.restore_namespaces)",
                )
            )
        return allowed

    def create_restore(self, req: RestoreRequest) -> BackupInfo:
        allowed = self._allowed(req)
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Restore",
            "metadata": {"name": req.name, "namespace": self.settings.namespace},
            "spec": {
                "backupName": req.backup_name,
                # Without it Velero restores every namespace of the backup, each under its own name:
                # only namespaces that land inside the allow-list are included.
                "includedNamespaces": restore_scope(req.namespace_mapping, allowed),
                "namespaceMapping": dict(req.namespace_mapping),
                "existingResourcePolicy": req.existing_resource_policy,
            },
        }
        return _info(self._create("restores", req.name, body), "Restore", self.region)

    def wait_known(self, name: str, on_progress: Callable[[BackupInfo], None] | None = None) -> BackupInfo:
        """Wait, up to backup.sync_timeout_s, until this cluster lists backup `name` Completed or
        PartiallyFailed (Velero restores both); raises BackupNotSynced after that, BackupFailed if
        the backup failed."""
        timeout = self.settings.sync_timeout_s
        deadline = time.monotonic() + timeout
        delay = 0.2
        while True:
            try:
                info = self.describe_backup(name)
            except ProviderError as exc:
                if exc.error.kind != "NotFound":
                    raise
                info = BackupInfo(name=name, region=self.region, phase="absent")
            if on_progress:
                on_progress(info)
            if info.phase in BACKUP_FAILED_PHASES:
                raise BackupFailed(info, judge_phase(info, False) or info.phase)
            if info.phase in (BACKUP_OK, PARTIALLY_FAILED):
                return info
            if time.monotonic() >= deadline:
                raise BackupNotSynced(info, timeout)
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 1.5, 5.0)

    def restore(
        self, req: RestoreRequest, on_progress: Callable[[BackupInfo], None] | None = None
    ) -> BackupInfo:
        self._allowed(req)  # a refused restore is refused at once, not after the wait
        self.wait_known(req.backup_name, on_progress)
        self.create_restore(req)
        return self._wait("restores", "Restore", req.name, on_progress)

    # --- Waiting -----------------------------------------------------------------------------

    def _wait(
        self,
        plural: str,
        kind: str,
        name: str,
        on_progress: Callable[[BackupInfo], None] | None,
    ) -> BackupInfo:
        timeout = self.settings.timeout_s
        deadline = time.monotonic() + timeout
        delay = 0.1
        while True:
            info = _info(self._get(plural, name), kind, self.region)
            if on_progress:
                on_progress(info)
            if info.phase in TERMINAL_PHASES:
                why = judge_phase(info, self.settings.partially_failed_ok)
                if why:
                    raise BackupFailed(info, why)
                return info
            if time.monotonic() >= deadline:
                raise BackupTimeout(info, timeout)
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 1.5, 2.0)
