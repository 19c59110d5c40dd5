"""deploy/kubernetes: every overlay renders with kubectl's kustomize, every object passes the
Kubernetes schema, and the worker's Roles grant exactly what the code calls."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from drctl.config.schema import FleetConfig, parse_config
from tests.support.kube_verbs import Permission, code_permissions
from tests.support.kustomize import OVERLAYS, one, render, render_dir

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


def test_the_tests_the_manifests_name_exist() -> None:
    """A comment that says which test checks a rule must name a test that does."""
    named = {
        (path.relative_to(ROOT), ref)
        for path in (ROOT / "deploy").rglob("*.yaml")
        for ref in re.findall(r"tests/[\w/]+\.py", path.read_text())
    }
    assert named, "the manifests name the tests that check them"
    assert [(str(p), ref) for p, ref in sorted(named) if not (ROOT / ref).is_file()] == []


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


# --- Least privilege: named objects, drill rights, the network, the codec ---------------------------


def _rules(objs: list[dict[str, Any]], role: str | None = None) -> list[dict[str, Any]]:
    return [
        rule
        for o in objs
        if o["kind"] == "Role" and (role is None or o["metadata"]["name"] == role)
        for rule in o["rules"]
    ]


def test_named_objects_are_limited_by_resource_names(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    cfg = fleet_of(objs)
    tracks = sorted(cfg.workload.deployment_name(t) for t in ("stable", "canary", "blue", "green"))
    httproute = getattr(cfg.traffic.regional_tier, "httproute", None)
    expected = {
        "deployments": tracks,
        "deployments/scale": tracks,
        "services": tracks,
        "httproutes": [httproute],
        # HPAs named as the Deployment they target (the Role says how to name another).
        "horizontalpodautoscalers": tracks,
    }
    seen = set()
    for rule in _rules(objs):
        for resource in rule["resources"]:
            if resource not in expected:
                continue
            # A create names no existing object, and a list returns many: neither can be limited by name.
            if set(rule["verbs"]) <= {"create", "list"}:
                assert "resourceNames" not in rule
                continue
            assert sorted(rule.get("resourceNames", [])) == sorted(expected[resource]), rule
            seen.add(resource)
    assert seen == set(expected)


# Verbs Kubernetes can limit by resourceNames (list, watch, create and deletecollection it cannot).
NAMEABLE = {"get", "update", "patch", "delete"}
# Objects whose names drctl cannot know when the Role is written, and why; each is limited by kind,
# verb and namespace instead, with the reason written beside the rule.
UNNAMEABLE = {
    ("velero.io", "backups"): "named at run time",
    ("velero.io", "restores"): "named at run time",
    ("velero.io", "schedules"): "named at run time",
    ("", "pods"): "Pod names are the platform's",
}


def test_every_verb_that_takes_names_is_limited_or_says_why(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    """resourceNames on every rule with a verb that allows them; a nameable verb never shares a rule
    with list or create (the names would not apply to them, or would be dropped to fit them)."""
    _, objs = rendered
    for rule in _rules(objs):
        verbs = set(rule["verbs"])
        if not verbs & NAMEABLE:
            assert "resourceNames" not in rule, rule
            continue
        assert verbs <= NAMEABLE, f"a verb that takes names shares a rule with one that cannot: {rule}"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                base = resource.split("/")[0]
                if (group, base) in UNNAMEABLE:
                    assert "resourceNames" not in rule
                    continue
                assert rule.get("resourceNames"), f"{group}/{resource} {sorted(verbs)} is not limited by name"
    sources = "".join(p.read_text() for p in (ROOT / "deploy" / "kubernetes").rglob("rbac-*.yaml"))
    for why in set(UNNAMEABLE.values()):
        assert why in sources, f"the Role does not say why: {why}"


def test_drill_rights_are_a_role_of_their_own_bound_only_where_drills_run(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    overlay, objs = rendered
    cfg = fleet_of(objs)
    pod_rules = [
        (o["metadata"]["name"], r)
        for o in objs
        if o["kind"] == "Role"
        for r in o["rules"]
        if "pods" in r["resources"]
    ]
    assert pod_rules and {name for name, _ in pod_rules} == {"drctl-drills"}
    drills_here = overlay in cfg.drills.allowed_targets and cfg.drills.fault_injector == "kubernetes"
    bindings = [o for o in objs if o["kind"] == "RoleBinding" and o["roleRef"]["name"] == "drctl-drills"]
    assert drills_here and len(bindings) == 1
    base = render_dir(ROOT / "deploy" / "kubernetes" / "base")
    assert not [r for r in _rules(base) if "pods" in r["resources"]], "the base must not grant drill rights"


def test_network_policy_allows_only_what_the_worker_needs(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    region, objs = rendered
    policy = one(objs, "NetworkPolicy")
    pod_labels = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    spec = policy["spec"]
    assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
    assert spec["podSelector"]["matchLabels"].items() <= pod_labels.items()
    cfg = fleet_of(objs)
    serving = cfg.workload.container_port  # the replicas' pod IPs, plain HTTP (providers/replicas.py)
    ports = {(p["protocol"], p["port"]) for rule in spec["egress"] for p in rule["ports"]}
    assert ports == {("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 6443), ("TCP", 7233), ("TCP", serving)}
    # The serving port only to this cluster's inference pods, selected as the drill actions select
    # them (app=<workload.app>) in this region's namespace: never to any address.
    to_pods = [
        r for r in spec["egress"] if ("TCP", serving) in {(p["protocol"], p["port"]) for p in r["ports"]}
    ]
    assert len(to_pods) == 1 and len(to_pods[0]["ports"]) == 1
    assert to_pods[0]["to"] == [
        {
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": cfg.region(region).kube.namespace}
            },
            "podSelector": {"matchLabels": {"app": cfg.workload.app}},
        }
    ]
    for rule in spec["egress"]:
        for peer in rule["to"]:
            if "ipBlock" in peer:
                assert "169.254.169.254/32" in peer["ipBlock"].get("except", [])
    assert [p["port"] for r in spec["ingress"] for p in r["ports"]] == [METRICS_PORT]
    # Only the monitoring namespace's Prometheus reaches it (the kubelet's probes come from the node).
    assert [r["from"] for r in spec["ingress"]] == [
        [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    ]


def test_the_production_overlays_enable_the_payload_codec(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    codec = fleet_of(objs).temporal.codec
    assert codec is not None and codec.keys_file and not codec.allow_plaintext
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "drctl-payload-key")
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"])
    assert codec.keys_file.startswith(mount["mountPath"] + "/") and not volume["secret"].get("optional")
