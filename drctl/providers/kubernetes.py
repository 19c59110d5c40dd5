"""One region's Kubernetes cluster: Deployments, their HPA, rollout status (official sync client).

Every API call goes through `_call`, which turns client exceptions into `ProviderError` carrying
the error table's verdict and the verb and resource that failed, so an activity can report
"Forbidden: patch deployments/scale inference/llm-stable: ..." instead of a bare 403.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

import urllib3.exceptions
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from drctl.config.schema import RegionConfig
from drctl.models.gitops import HPA_MAX, HPA_MIN, GitOpsManaged, argocd_tracking, changes
from drctl.providers.base import DeploymentState
from drctl.providers.errors import ProviderError, RolloutTimeout, classify
from drctl.providers.kube_client import api_client_for
from drctl.providers.kube_objects import MERGE, STRICT, as_copy, on_conflict

T = TypeVar("T")

# Object patches name their type (a JSON merge patch here): without one the client picks JSON
# Patch for a list body and strategic merge for an object, which no custom resource accepts.
# Manifests stay plain dicts (the client serializes them verbatim), so fields the typed models do
# not know survive; `_raw` hands them over as Any because the client's stubs name only its models.
# (connect, read) seconds per request, so a hung API server cannot stall an activity forever.
REQUEST_TIMEOUT = (5.0, 30.0)


class KubernetesPlatform:
    """Implements `drctl.providers.base.Platform` for one region."""

    def __init__(
        self,
        region: RegionConfig,
        api_client: client.ApiClient | None = None,
        poll_interval_s: float = 2.0,
        request_timeout: tuple[float, float] = REQUEST_TIMEOUT,
    ) -> None:
        self.region = region.name
        self.request_timeout = request_timeout
        self.namespace = region.kube.namespace
        self.poll_interval_s = poll_interval_s
        self.api_client = api_client or api_client_for(region.kube)
        self.apps = client.AppsV1Api(self.api_client)
        self.core = client.CoreV1Api(self.api_client)
        self.autoscaling = client.AutoscalingV2Api(self.api_client)

    def close(self) -> None:
        self.api_client.close()

    def _call(self, action: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (ApiException, urllib3.exceptions.HTTPError) as exc:
            raise ProviderError(classify(exc, action=f"{action} (cluster of {self.region})")) from exc

    def _where(self, resource: str, name: str) -> str:
        return f"{resource} {self.namespace}/{name}"

    # --- reads ------------------------------------------------------------------------------------

    def _hpa_for(self, name: str) -> Any | None:
        """The HPA whose scaleTargetRef is this Deployment (HPAs need not share its name)."""
        hpas = self._call(
            f"list horizontalpodautoscalers in {self.namespace}",
            lambda: self.autoscaling.list_namespaced_horizontal_pod_autoscaler(
                self.namespace, _request_timeout=self.request_timeout
            ),
        )
        for hpa in hpas.items:
            ref = hpa.spec.scale_target_ref
            if ref.kind == "Deployment" and ref.name == name:
                return hpa
        return None

    def _read(self, name: str) -> Any:
        return self._call(
            f"get {self._where('deployments', name)}",
            lambda: self.apps.read_namespaced_deployment(
                name, self.namespace, _request_timeout=self.request_timeout
            ),
        )

    def _state(self, dep: Any, hpa: Any | None) -> DeploymentState:
        status = dep.status
        containers = dep.spec.template.spec.containers if dep.spec.template.spec else []
        return DeploymentState(
            name=dep.metadata.name,
            namespace=dep.metadata.namespace or self.namespace,
            generation=dep.metadata.generation or 0,
            observed_generation=(status.observed_generation if status else None) or 0,
            replicas=dep.spec.replicas if dep.spec.replicas is not None else 1,
            status_replicas=(status.replicas if status else None) or 0,
            updated_replicas=(status.updated_replicas if status else None) or 0,
            ready_replicas=(status.ready_replicas if status else None) or 0,
            available_replicas=(status.available_replicas if status else None) or 0,
            image=containers[0].image if containers else None,
            hpa_min_replicas=hpa.spec.min_replicas if hpa else None,
            hpa_max_replicas=hpa.spec.max_replicas if hpa else None,
            gitops=argocd_tracking(dep.metadata.labels, dep.metadata.annotations),
        )

    def get_deployment(self, name: str) -> DeploymentState:
        return self._state(self._read(name), self._hpa_for(name))

    # --- scale and rollout ------------------------------------------------------------------------

    def scale(self, name: str, replicas: int) -> DeploymentState:
        """Set spec.replicas through /scale; keep an HPA targeting the Deployment from undoing it.

        The HPA is changed first: its controller enforces minReplicas, so scaling up before
        raising it (or down before lowering it) would be reverted on its next sync.
        """
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0, got {replicas}")
        hpa = self._hpa_for(name)
        also: list[GitOpsManaged] = []
        if hpa is not None:
            # HPA minReplicas must be >= 1 (scale-to-zero is an alpha feature gate).
            spec: dict[str, int] = {"minReplicas": max(1, replicas)}
            if replicas > hpa.spec.max_replicas:
                spec["maxReplicas"] = replicas
            hpa_name = hpa.metadata.name
            patched = self._call(
                f"patch {self._where('horizontalpodautoscalers', hpa_name)}",
                lambda: self.autoscaling.patch_namespaced_horizontal_pod_autoscaler(
                    hpa_name,
                    self.namespace,
                    {"spec": spec},
                    _content_type=MERGE,
                    field_validation=STRICT,
                    _request_timeout=self.request_timeout,
                ),
            )
            # The marker of the object as written (the server's answer), not of the one listed before.
            meta = patched.metadata or client.V1ObjectMeta()
            written = [HPA_MIN] + ([HPA_MAX] if "maxReplicas" in spec else [])
            also = changes(
                self.region,
                "HorizontalPodAutoscaler",
                hpa_name,
                written,
                argocd_tracking(meta.labels, meta.annotations),
            )
        self._call(
            f"patch {self._where('deployments/scale', name)}",
            lambda: self.apps.patch_namespaced_deployment_scale(
                name,
                self.namespace,
                {"spec": {"replicas": replicas}},
                _content_type=MERGE,
                field_validation=STRICT,
                _request_timeout=self.request_timeout,
            ),
        )
        return self.get_deployment(name).model_copy(update={"also_managed": also})

    @staticmethod
    def _deadline_exceeded(dep: Any) -> str | None:
        for cond in (dep.status.conditions if dep.status else None) or []:
            if cond.type == "Progressing" and cond.reason == "ProgressDeadlineExceeded":
                return f"Progressing: ProgressDeadlineExceeded: {cond.message or ''}".rstrip(": ")
        return None

    def wait_rollout(
        self,
        name: str,
        timeout_s: float,
        on_progress: Callable[[DeploymentState], None] | None = None,
        load_allowance_s: float | None = None,
        max_timeout_s: float | None = None,
    ) -> DeploymentState:
        """Poll until rolled out, by `kubectl rollout status`'s rules; raise RolloutTimeout otherwise.

        kubernetes/kubectl pkg/polymorphichelpers/rollout_status.go (DeploymentStatusViewer.Status):
        nothing is judged until status.observedGeneration >= metadata.generation, since until then
        the status (its conditions included) is the controller's verdict on the previous spec; only
        then does a Progressing condition with reason ProgressDeadlineExceeded mean failure.

        Polls back off from `poll_interval_s / 16`, doubling, to `poll_interval_s`: a quick rollout
        is seen at once, and a long one costs one GET per `poll_interval_s`, not a spin. With
        `load_allowance_s`, the deadline is the Deployment's own progressDeadlineSeconds plus that
        allowance (a model's load time) when that is longer than `timeout_s` (never past
        `max_timeout_s`): the controller is the judge, and ours only a backstop behind it.
        on_progress is called on every poll (activities heartbeat from it), not only on change.
        """
        started = time.monotonic()
        hpa = self._hpa_for(name)
        pause_s = self.poll_interval_s / 16
        why = ""
        while True:
            dep = self._read(name)
            if load_allowance_s is not None:  # once: the deadline the spec had as the wait began
                progress_s = _progress_deadline_s(dep)
                if progress_s + load_allowance_s > timeout_s:
                    timeout_s = min(progress_s + load_allowance_s, max_timeout_s or math.inf)
                    why = f" (progressDeadlineSeconds {progress_s:g} + model load {load_allowance_s:g}s)"
                load_allowance_s = None
            state = self._state(dep, hpa)
            if on_progress is not None:
                on_progress(state)
            missing = state.missing()
            if missing is None:
                return state
            # The controller itself gave up on this generation: waiting out our deadline would
            # only delay the verdict. A verdict on an older generation is not about this rollout.
            stuck = self._deadline_exceeded(dep) if state.observed_generation >= state.generation else None
            if stuck:
                raise RolloutTimeout(state, time.monotonic() - started, f"{stuck}; {missing}")
            remaining = started + timeout_s - time.monotonic()
            if remaining <= 0:
                raise RolloutTimeout(state, timeout_s, missing + why)
            time.sleep(min(pause_s, remaining))
            pause_s = min(pause_s * 2, self.poll_interval_s)

    # --- manifests (upgrade and migration work) --------------------------------------------------

    def apply_deployment(self, manifest: dict[str, Any]) -> DeploymentState:
        """Create the Deployment, or replace its spec if it exists (status stays the controller's).

        A replace names the resourceVersion it read; on 409 (a controller wrote in between) it reads
        again and re-applies, up to CONFLICT_ATTEMPTS times.
        """
        self._create_or_replace(
            "deployments",
            manifest,
            self.apps.create_namespaced_deployment,
            self._read,
            self.apps.replace_namespaced_deployment,
        )
        return self.get_deployment(manifest["metadata"]["name"])

    def delete_deployment(self, name: str) -> bool:
        """Delete the Deployment; False if it was already gone (deleting is idempotent)."""
        try:
            self._call(
                f"delete {self._where('deployments', name)}",
                lambda: self.apps.delete_namespaced_deployment(
                    name, self.namespace, _request_timeout=self.request_timeout
                ),
            )
        except ProviderError as exc:
            if exc.error.kind == "NotFound":
                return False
            raise
        return True

    def apply_service(self, manifest: dict[str, Any]) -> None:
        """Create the Service, or replace it keeping what the cluster allocated (clusterIP, nodePorts)."""
        self._create_or_replace(
            "services",
            manifest,
            self.core.create_namespaced_service,
            lambda name: self.core.read_namespaced_service(
                name, self.namespace, _request_timeout=self.request_timeout
            ),
            self.core.replace_namespaced_service,
        )

    def _create_or_replace(
        self,
        plural: str,
        manifest: dict[str, Any],
        create: Callable[..., Any],
        read: Callable[[str], Any],
        replace: Callable[..., Any],
    ) -> None:
        name = manifest["metadata"]["name"]
        where = self._where(plural, name)
        try:
            create(
                self.namespace,
                _raw(as_copy(manifest)),
                field_validation=STRICT,
                _request_timeout=self.request_timeout,
            )
            return
        except ApiException as exc:
            if exc.status != 409:
                raise ProviderError(classify(exc, action=f"create {where}")) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise ProviderError(classify(exc, action=f"create {where}")) from exc

        def again() -> Any:
            current = read(name)
            # Unset allocations (a Service's clusterIP, nodePorts) are kept by the server on a
            # replace; the copy's own would be refused.
            body = _with_resource_version(
                as_copy(manifest), current.metadata.resource_version if current.metadata else None
            )
            return replace(
                name,
                self.namespace,
                _raw(body),
                field_validation=STRICT,
                _request_timeout=self.request_timeout,
            )

        self._call(f"replace {where}", lambda: on_conflict(again))


def _progress_deadline_s(dep: Any) -> float:
    """spec.progressDeadlineSeconds; the API server defaults it to 600 (apps/v1 SetDefaults_Deployment)."""
    found = dep.spec.progress_deadline_seconds if dep.spec else None
    return float(found) if found is not None else 600.0


def _with_resource_version(manifest: dict[str, Any], resource_version: str | None) -> dict[str, Any]:
    """A replace must name the version it replaces, so a concurrent writer's change is not lost (409)."""
    meta = {**manifest.get("metadata", {}), "resourceVersion": resource_version}
    return {**manifest, "metadata": meta}


def _raw(manifest: dict[str, Any]) -> Any:
    return manifest
