"""The GitOps examples: valid against the Argo CD and Flux CRD schemas (vendored offline), and
ignoring every field drctl owns, for the names the region overlays' fleet configs give."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from drctl.config.schema import load_config
from drctl.models.failover import FailoverResult
from drctl.models.gitops import OWNED, GitOpsManaged
from drctl.models.rebalance import RebalanceResult
from drctl.models.upgrade import UpgradeResult

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
APP = yaml.safe_load((ROOT / "deploy" / "gitops" / "argocd-application.yaml").read_text())
FLUX = yaml.safe_load((ROOT / "deploy" / "gitops" / "flux-kustomization.yaml").read_text())
CFG = load_config(ROOT / "deploy" / "kubernetes" / "overlays" / "us-west-1" / "fleet.yaml")
STABLE = CFG.workload.deployment_name("stable")
ROUTE = CFG.traffic.regional_tier.httproute  # type: ignore[union-attr]

# The objects drctl writes at run time (drctl.models.gitops.OWNED has their fields): the API group,
# and the name the examples give (the HPA is found by its target, whatever its name: none).
GROUP = {
    "Deployment": "apps",
    "HorizontalPodAutoscaler": "autoscaling",
    "HTTPRoute": "gateway.networking.k8s.io",
}
NAME = {"Deployment": STABLE, "HorizontalPodAutoscaler": None, "HTTPRoute": ROUTE}


def pointer(field: str) -> str:
    """A recorded field as a JSON Pointer: spec.rules[].backendRefs[].weight is
    /spec/rules/*/backendRefs/*/weight, containers[0] is containers/0."""
    return "/" + re.sub(r"\[(\d*)\]", lambda m: "." + (m.group(1) or "*"), field).replace(".", "/")


OWNED_POINTERS = [(kind, pointer(f)) for kind, fields in OWNED.items() for f in fields]


def _unknown_keys(doc: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """Keys the schema does not define: Kubernetes would silently prune them (a typo'd field)."""
    if isinstance(doc, dict) and "properties" in schema:
        out = []
        for k, v in doc.items():
            if k not in schema["properties"]:
                if not schema.get("x-kubernetes-preserve-unknown-fields") and not schema.get(
                    "additionalProperties"
                ):
                    out.append(f"{where}/{k}")
                continue
            out += _unknown_keys(v, schema["properties"][k], f"{where}/{k}")
        return out
    if isinstance(doc, list) and "items" in schema:
        return [e for i, item in enumerate(doc) for e in _unknown_keys(item, schema["items"], f"{where}/{i}")]
    return []


@pytest.mark.parametrize(
    ("doc", "schema", "api"),
    [
        (APP, "argocd-application.schema.json", ("argoproj.io/v1alpha1", "Application")),
        (FLUX, "flux-kustomization.schema.json", ("kustomize.toolkit.fluxcd.io/v1", "Kustomization")),
    ],
)
def test_the_examples_are_valid_against_their_crd_schemas(
    doc: dict, schema: str, api: tuple[str, str]
) -> None:
    crd = json.loads((DATA / schema).read_text())
    assert (doc["apiVersion"], doc["kind"]) == api
    errors = list(jsonschema.Draft7Validator(crd).iter_errors(doc))
    assert not errors, [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]
    assert not _unknown_keys(doc, crd), _unknown_keys(doc, crd)


def test_the_schema_check_catches_a_typo() -> None:
    crd = json.loads((DATA / "argocd-application.schema.json").read_text())
    typo = {**APP, "spec": {**APP["spec"], "ignoreDiferences": APP["spec"]["ignoreDifferences"]}}
    assert _unknown_keys(typo, crd) == ["/spec/ignoreDiferences"]


def _covers(path: str, owned: str) -> bool:
    """An ignore path covers an owned field when the field is it or below it (`*`: any one element)."""
    return re.fullmatch(re.escape(path).replace(r"\*", "[^/]+") + "(/.*)?", owned) is not None


def _argo_paths(kind: str) -> list[str]:
    """The example Application's ignored paths for `kind`, as pointers (jq `[]` is any element)."""
    out: list[str] = []
    for entry in APP["spec"]["ignoreDifferences"]:
        if entry["kind"] == kind:
            assert (entry.get("group", ""), entry.get("name")) == (GROUP[kind], NAME[kind]), entry
            out += entry.get("jsonPointers", [])
            out += [_argo_path(e) for e in entry.get("jqPathExpressions", [])]
    return out


def _flux_paths(kind: str) -> list[str]:
    out: list[str] = []
    for rule in FLUX["spec"]["ignore"]:
        t = rule["target"]
        if t["kind"] == kind:
            assert (t.get("group"), t.get("name")) == (GROUP[kind], NAME[kind]), t
            out += rule["paths"]
    return out


@pytest.mark.parametrize("owned", OWNED_POINTERS, ids=[f"{k}:{p}" for k, p in OWNED_POINTERS])
def test_both_examples_ignore_every_field_drctl_owns(owned: tuple[str, str]) -> None:
    kind, field = owned
    assert any(_covers(p, field) for p in _argo_paths(kind)), (
        f"argocd-application.yaml does not ignore {owned}"
    )
    assert any(_covers(p, field) for p in _flux_paths(kind)), (
        f"flux-kustomization.yaml does not ignore {owned}"
    )


def test_the_examples_ignore_only_fields_drctl_writes() -> None:
    """Equal, not only covering: an entry for a field drctl never writes would hide a real drift."""
    kinds = {e["kind"] for e in APP["spec"]["ignoreDifferences"]} | {
        r["target"]["kind"] for r in FLUX["spec"]["ignore"]
    }
    assert kinds == set(OWNED)
    for kind in OWNED:
        for path in _argo_paths(kind) + _flux_paths(kind):
            assert any(_covers(path, p) for k, p in OWNED_POINTERS if k == kind), (kind, path)


def _docs_table() -> list[list[str]]:
    """The rows of docs/gitops.md's "What drctl owns" table, as cells with their backticks."""
    section = (ROOT / "docs" / "gitops.md").read_text().split("## What drctl owns", 1)[1].split("\n## ", 1)[0]
    table = section[section.index("\n|") :].split("\n\n", 1)[0]  # the first table only
    lines = table.strip().splitlines()[2:]  # past the header and rule
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def _code(cell: str) -> str:
    found = re.findall(r"`([^`]+)`", cell)
    assert len(found) == 1, cell
    return found[0]


def test_the_docs_table_lists_each_field_drctl_writes_with_the_examples_entries() -> None:
    rows = _docs_table()
    assert sorted((r[0].split()[0], _code(r[1])) for r in rows) == sorted(
        (kind, f) for kind, fields in OWNED.items() for f in fields
    )
    for kind in OWNED:
        argo = {_argo_path(_code(r[3])) for r in rows if r[0].split()[0] == kind}
        flux = {_code(r[4]) for r in rows if r[0].split()[0] == kind}
        assert argo == set(_argo_paths(kind)), kind
        assert flux == set(_flux_paths(kind)), kind


def _argo_path(entry: str) -> str:
    """A docs cell's Argo CD entry (a jsonPointer, or a jq path) as _argo_paths gives it."""
    return entry if entry.startswith("/") else "/" + entry.lstrip(".").replace("[]", "/*").replace(".", "/")


def test_argo_cd_keeps_the_ignored_fields_on_sync_and_heals_the_rest() -> None:
    policy = APP["spec"]["syncPolicy"]
    assert "RespectIgnoreDifferences=true" in policy["syncOptions"]
    assert policy["automated"]["selfHeal"] is True
    assert APP["spec"]["destination"]["namespace"] == CFG.regions[0].kube.namespace


def test_the_documented_result_field_exists_on_both_results() -> None:
    doc = (ROOT / "docs" / "gitops.md").read_text()
    assert '"gitops_managed"' in doc
    for model in (FailoverResult, UpgradeResult):
        assert "gitops_managed" in model.model_fields
    for kind, name in NAME.items():
        assert kind in doc and (name is None or f"`{name}`" in doc)


# Every operation whose result records gitops_managed, with the fields its result needs.
_NOW = datetime.now(UTC)
RESULTS: dict[str, dict[str, Any]] = {
    "failover": dict(
        status="succeeded",
        source="us-west-1",
        target="us-east-1",
        started_at=_NOW,
        fault_at=_NOW,
        rto_target_s=30,
    ),
    "failback": dict(status="succeeded"),
    "upgrade": dict(outcome="SUCCEEDED", reason="ok", upgrade_id="u1", image="vllm:v2", strategy="canary"),
    "migrate": dict(
        outcome="SUCCEEDED", reason="ok", migration_id="m1", source="us-west-1", target="us-east-1"
    ),
    "rebalance": dict(status="succeeded", action="shed"),
}
HPA = GitOpsManaged(
    region="us-east-1",
    kind="HorizontalPodAutoscaler",
    name=STABLE,
    field="spec.minReplicas",
    tracking="app.kubernetes.io/instance=llm",
)


def test_every_operation_that_records_gitops_managed_has_a_renderer_here() -> None:
    from drctl.cli.ops import _results

    recording = {op for op, (model, _, _) in _results().items() if "gitops_managed" in model.model_fields}
    assert recording == set(RESULTS)


@pytest.mark.parametrize("operation", sorted(RESULTS))
def test_each_operation_shows_its_gitops_managed_objects_in_its_table_and_json(
    operation: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import typer

    from drctl.cli import common
    from drctl.cli.launch import Launched, conclude
    from drctl.cli.ops import _results
    from drctl.client.outcome import Finished

    model, render, as_json = _results()[operation]
    res = model.model_validate({**RESULTS[operation], "gitops_managed": [HPA.model_dump()]})
    with common.console.capture() as out:
        render(res, "http://ui")
    # A table wraps its cells: compare without spaces and cell borders.
    text = re.sub(r"[\s│┃]+", "", out.get())
    row = f"GitOps-managed us-east-1 HorizontalPodAutoscaler/{STABLE}: spec.minReplicas changed"
    assert re.sub(r"\s+", "", row) in text and "(app.kubernetes.io/instance=llm)" in text
    with pytest.raises(typer.Exit):
        conclude(Launched(f"{operation}/x", "http://ui", Finished(res)), common.Output.json, render, as_json)
    assert json.loads(capsys.readouterr().out)["result"]["gitops_managed"] == [HPA.model_dump()]
    # An operation that changed nothing Argo CD tracks shows no such row.
    with common.console.capture() as out:
        render(model.model_validate(RESULTS[operation]), "http://ui")
    assert "GitOps-managed" not in out.get()


def test_the_rebalance_paragraph_names_what_its_result_holds() -> None:
    """docs/gitops.md sends a rebalance's reader to its `scaled`/`scaled_back` maps: they must exist,
    and the day the result records `gitops_managed` the paragraph saying it does not must go."""
    doc = " ".join((ROOT / "docs" / "gitops.md").read_text().split())
    assert "a rebalance's pre-scale" in doc and "rebalance/<fleet>" in doc
    for name in ("scaled", "scaled_back"):
        assert f"`{name}`" in doc and name in RebalanceResult.model_fields, name
    says_missing = "Its result does not carry `gitops_managed` yet" in doc
    assert says_missing == ("gitops_managed" not in RebalanceResult.model_fields)
