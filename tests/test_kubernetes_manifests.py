"""deploy/kubernetes: every overlay renders with kubectl's kustomize, every object passes the
Kubernetes schema, and the worker's Roles grant exactly what the code calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from drctl.config.schema import FleetConfig, parse_config
from tests.support.kube_verbs import Permission, code_permissions
from tests.support.kustomize import OVERLAYS, one, render

ROOT = Path(__file__).resolve().parents[1]
# Custom resources have no schema in kubernetes-validate; only these kinds may skip it.
CRD_KINDS = {"HTTPRoute", "Backup", "Restore", "Schedule", "ServiceMonitor"}
METRICS_PORT = 9464  # worker.http_port's default


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, render(request.param)


def fleet_of(objs: list[dict[str, Any]]) -> FleetConfig:
    cm = one(objs, "ConfigMap")
    return parse_config(cm["data"]["fleet.yaml"], file=f"ConfigMap {cm['metadata']['name']}")


def test_there_is_an_overlay_per_region() -> None:
    assert OVERLAYS == ["us-east-1", "us-west-1"]


def test_every_object_passes_the_schema(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    version = kubernetes_validate.latest_version()
    for obj in objs:
        if obj["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(obj, version, strict=True)  # raises naming the bad field


def test_worker_serves_the_main_queue_and_its_region(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    region, objs = rendered
    container = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "worker" and "--no-main" not in args
    assert args[args.index("--region") + 1] == region and args.count("--region") == 1
    assert args[args.index("--log-format") + 1] == "json"


def test_fleet_config_reaches_its_own_cluster_in_cluster_and_the_others_by_kubeconfig(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    region, objs = rendered
    cfg = fleet_of(objs)
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    for r in cfg.regions:
        if r.name == region:
            assert r.kube.in_cluster, f"{r.name}: its own cluster should use the service account"
        else:
            assert r.kube.context and r.kube.kubeconfig_path
            assert any(r.kube.kubeconfig_path.startswith(m + "/") for m in mounts), r.kube.kubeconfig_path
    assert pod["serviceAccountName"] == one(objs, "ServiceAccount")["metadata"]["name"]


def test_pod_security(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the Dockerfile's user
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"]
        assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
        # A read-only root needs somewhere writable for HOME and temp files.
        tmp = {m["mountPath"] for m in c["volumeMounts"]}
        assert "/tmp" in tmp and {"name": "HOME", "value": "/tmp"} in c["env"]


def test_probes_hit_the_worker_http_endpoint(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    c = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe, path in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")]:
        get = c[probe]["httpGet"]
        assert get["path"] == path and ports[get["port"]] == METRICS_PORT


def test_shutdown_grace_outlasts_the_workers_own(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    # Otherwise the kubelet kills activities the worker is still letting finish.
    assert pod["terminationGracePeriodSeconds"] > fleet_of(objs).worker.graceful_shutdown_s + 10


def test_pdb_and_service_select_the_worker_pods(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    dep = one(objs, "Deployment")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < dep["spec"]["replicas"], "a drain could never evict a worker"
    svc = one(objs, "Service")
    assert svc["spec"]["selector"].items() <= labels.items()


def test_secrets_are_references_not_values(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    assert not [o for o in objs if o["kind"] == "Secret"], (
        "secrets are created by the operator, never rendered"
    )
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    env = {e["valueFrom"]["secretKeyRef"]["name"] for e in pod["containers"][0]["env"] if "valueFrom" in e}
    assert {"drctl-temporal-tls", "drctl-payload-key", "drctl-inference-token", "drctl-kubeconfig"} <= secrets
    env |= {e["secretRef"]["name"] for e in pod["containers"][0].get("envFrom", []) if "secretRef" in e}
    assert {"drctl-temporal", "drctl-notifications"} <= env
    assert fleet_of(objs).temporal.api_key_env == "TEMPORAL_API_KEY"


# --- RBAC: exactly the verbs the code uses ---------------------------------------------------------


def _code() -> dict[Permission, list[str]]:
    files = [
        p
        for root in ("drctl", "activities")
        for p in sorted((ROOT / root).rglob("*.py"))
        if "devstack" not in p.parts
    ]  # the emulation is not the product
    return code_permissions(files)


def _granted(objs: list[dict[str, Any]]) -> dict[Permission, str]:
    out: dict[Permission, str] = {}
    for role in (o for o in objs if o["kind"] in ("Role", "ClusterRole")):
        for rule in role["rules"]:
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        assert "*" not in (g, r, v), f"{role['metadata']} grants a wildcard"
                        out[(g, r, v)] = role["metadata"].get("namespace", "(cluster)")
    return out


def test_the_scanner_sees_the_calls_it_must() -> None:
    code = _code()
    for perm in [
        ("apps", "deployments/scale", "patch"),
        ("velero.io", "restores", "create"),
        ("gateway.networking.k8s.io", "httproutes", "update"),
        ("", "pods", "delete"),
    ]:
        assert perm in code, perm


def test_roles_grant_exactly_what_the_code_calls(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    code, granted = _code(), _granted(objs)
    missing = {p: code[p][0] for p in code if p not in granted}
    unused = sorted(p for p in granted if p not in code)
    assert not missing, f"the code calls these but no Role grants them: {missing}"
    assert not unused, f"Roles grant these but no code calls them: {unused}"
    assert not [o for o in objs if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def test_each_role_lives_in_the_namespace_its_objects_do(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    cfg = fleet_of(objs)
    for (group, _, _), ns in _granted(objs).items():
        assert ns == (cfg.backup.namespace if group == "velero.io" else cfg.regions[0].kube.namespace)
    for binding in (o for o in objs if o["kind"] == "RoleBinding"):
        sa = [s for s in binding["subjects"] if s["kind"] == "ServiceAccount"]
        assert sa == [{"kind": "ServiceAccount", "name": "drctl-worker", "namespace": "drctl"}]
