"""CRD CEL rules (x-kubernetes-validations) as the API server evaluates them, through the official client.

Each vendored CRD with rules gets objects that break one rule, refused with the API server's own
text (`<field>: Invalid value: "<type>": <message>`, errors.NewInvalid's Status with one cause per
error); the objects drctl writes pass. The rule machinery the vendored CRDs do not exercise
(transition rules, ratcheting, messageExpression, reason, fieldPath) is checked on small schemas, and
a rule the stand-in cannot evaluate fails the CRD load.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from drctl.devstack import kube_cel, kube_schema
from tests.support.kubeapi import call, http_route, routes

NS = "cel"
ROUTES = routes(NS)
QUALIFIED = "HTTPRoute.gateway.networking.k8s.io"


def _route(name: str, **rule: Any) -> dict[str, Any]:
    return http_route(name, [{"name": "llm-stable", "port": 80, "weight": 100}], parent="gw", **rule)


def _header_filter(kind: str = "ResponseHeaderModifier") -> dict[str, Any]:
    field = kind[0].lower() + kind[1:]
    return {"type": kind, field: {"set": [{"name": "x-drctl-region", "value": "us-west-1"}]}}


async def _refused(api: k8s.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(k8s.ApiException) as exc:
        await call(k8s.CustomObjectsApi(api).create_namespaced_custom_object, *ROUTES, body)
    assert exc.value.status == 422
    return dict(json.loads(exc.value.body))


def test_only_httproute_carries_rules_among_the_vendored_crds() -> None:
    # Velero v1.18.1's CRDs have none; a vendored update that adds some needs cases here.
    with_rules = {kind for (_, kind), crd in kube_schema.load_crds(kube_schema._CRDS).items() if crd["cel"]}
    assert with_rules == {"HTTPRoute"}


BROKEN = [
    (
        "no-port",
        {"backendRefs": [{"name": "llm-stable", "weight": 1}]},
        "spec.rules[0].backendRefs[0]",
        'Invalid value: "object": Must have port for Service reference',
    ),
    (
        "two-modifiers",
        {"filters": [_header_filter(), _header_filter()]},
        "spec.rules[0].filters",
        'Invalid value: "array": ResponseHeaderModifier filter cannot be repeated',
    ),
    (
        "type-without-field",
        {"filters": [{"type": "RequestHeaderModifier"}]},
        "spec.rules[0].filters[0]",
        'Invalid value: "object": filter.requestHeaderModifier must be specified for RequestHeaderModifier '
        "filter.type",
    ),
    (
        "double-slash",
        {"matches": [{"path": {"type": "PathPrefix", "value": "/v1//completions"}}]},
        "spec.rules[0].matches[0].path",
        "Invalid value: \"object\": must not contain '//' when type one of ['Exact', 'PathPrefix']",
    ),
    (
        "bad-char",
        {"matches": [{"path": {"type": "Exact", "value": "/v1/a b"}}]},
        "spec.rules[0].matches[0].path",
        'Invalid value: "object": must only contain valid characters (matching '
        "^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']",
    ),
    (
        "timeouts",
        {"timeouts": {"request": "500ms", "backendRequest": "1s"}},
        "spec.rules[0].timeouts",
        'Invalid value: "object": backendRequest timeout cannot be longer than request timeout',
    ),
]


@pytest.mark.parametrize(("name", "rule", "field", "message"), BROKEN, ids=[b[0] for b in BROKEN])
async def test_a_route_breaking_a_rule_is_refused_as_the_api_server_words_it(
    api: k8s.ApiClient, name: str, rule: dict[str, Any], field: str, message: str
) -> None:
    body = _route(name, **rule)
    status = await _refused(api, body)
    assert status["message"] == f'{QUALIFIED} "{name}" is invalid: {field}: {message}'
    assert (status["reason"], status["code"], status["status"]) == ("Invalid", 422, "Failure")
    assert status["details"] == {
        "name": name,
        "group": "gateway.networking.k8s.io",
        "kind": "HTTPRoute",
        "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}],
    }


async def test_rules_see_schema_defaults_and_escaped_names(api: k8s.ApiClient) -> None:
    custom = k8s.CustomObjectsApi(api)
    # parentRefs[].group and .kind come from the CRD's defaults, so the rule comparing them runs;
    # `namespace` reaches CEL as __namespace__. Two refs to one parent, one with a sectionName:
    body = _route("parents")
    body["spec"]["parentRefs"] = [
        {"name": "gw", "namespace": "a"},
        {"name": "gw", "namespace": "a", "sectionName": "h"},
    ]
    status = await _refused(api, body)
    assert status["message"] == (
        f'{QUALIFIED} "parents" is invalid: spec.parentRefs: Invalid value: "array": sectionName must be '
        "specified when parentRefs includes 2 or more references to the same parent"
    )
    body["spec"]["parentRefs"][0]["namespace"] = "b"  # different parents: allowed
    created = await call(custom.create_namespaced_custom_object, *ROUTES, body)
    assert created["spec"]["parentRefs"][0]["group"] == "gateway.networking.k8s.io"
    assert created["spec"]["rules"][0]["backendRefs"][0] == {
        "name": "llm-stable", "port": 80, "weight": 100, "group": "", "kind": "Service"
    }  # fmt: skip
    assert created["spec"]["rules"][0]["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]


async def test_every_failure_is_reported_and_a_schema_error_holds_the_rules_back(api: k8s.ApiClient) -> None:
    body = _route("many", filters=[_header_filter(), _header_filter()])
    body["spec"]["rules"][0]["backendRefs"].append({"name": "llm-canary", "weight": 1})
    status = await _refused(api, body)
    assert status["message"] == (
        f'{QUALIFIED} "many" is invalid: [spec.rules[0].backendRefs[1]: Invalid value: "object": Must have '
        'port for Service reference, spec.rules[0].filters: Invalid value: "array": ResponseHeaderModifier '
        "filter cannot be repeated]"
    )
    assert [c["field"] for c in status["details"]["causes"]] == [
        "spec.rules[0].backendRefs[1]",
        "spec.rules[0].filters",
    ]
    # A type error is blocking: the API server reports it and checks no rule.
    body["spec"]["rules"][0]["backendRefs"][1]["weight"] = "heavy"
    status = await _refused(api, body)
    fields = [c["field"] for c in status["details"]["causes"]]
    assert fields == ["spec.rules[0].backendRefs[1].weight", "<nil>"]
    assert status["details"]["causes"][1]["message"] == (
        'Invalid value: "null": some validation rules were not checked because the object was invalid; '
        "correct the existing errors to complete validation"
    )


async def test_an_update_that_breaks_a_rule_is_refused_and_the_stored_route_kept(api: k8s.ApiClient) -> None:
    custom = k8s.CustomObjectsApi(api)
    created = await call(custom.create_namespaced_custom_object, *ROUTES, _route("upd"))
    changed = copy.deepcopy(created)
    changed["spec"]["rules"][0]["backendRefs"][0].pop("port")
    with pytest.raises(k8s.ApiException) as exc:
        await call(custom.replace_namespaced_custom_object, *ROUTES, "upd", changed)
    assert exc.value.status == 422 and "Must have port for Service reference" in exc.value.body
    patch = {"spec": {"rules": [{"backendRefs": [{"name": "llm-stable", "weight": 1}]}]}}
    with pytest.raises(k8s.ApiException) as exc:
        await call(custom.patch_namespaced_custom_object, *ROUTES, "upd", patch)
    assert exc.value.status == 422
    stored = await call(custom.get_namespaced_custom_object, *ROUTES, "upd")
    assert stored["spec"] == created["spec"]


async def test_the_routes_drctl_writes_pass(api: k8s.ApiClient) -> None:
    """The dev stack's seeded route, then the weight change and region header drctl's PUT makes."""
    custom = k8s.CustomObjectsApi(api)
    seeded = _route("llm")
    seeded["spec"]["rules"][0]["backendRefs"].append({"name": "llm-canary", "port": 80, "weight": 0})
    created = await call(custom.create_namespaced_custom_object, *ROUTES, seeded)
    rule = created["spec"]["rules"][0]
    rule["backendRefs"][0]["weight"], rule["backendRefs"][1]["weight"] = 95, 5
    rule["filters"] = [_header_filter()]
    replaced = await call(custom.replace_namespaced_custom_object, *ROUTES, "llm", created)
    assert [r["weight"] for r in replaced["spec"]["rules"][0]["backendRefs"]] == [95, 5]


# --- the rule machinery on small schemas ------------------------------------------------------------


def _node(rules: list[dict[str, Any]], **props: Any) -> kube_cel.Node:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": props or {"size": {"type": "integer"}, "mode": {"type": "string"}},
                "x-kubernetes-validations": rules,
            }
        },
    }
    node = kube_cel.compile_schema(schema)
    assert node is not None
    return node


def _errors(outcome: kube_cel.Outcome) -> list[str]:
    return [str(e) for e in outcome.errors]


def test_transition_rules_are_skipped_on_create_and_checked_on_update() -> None:
    node = _node([{"rule": "self.size >= oldSelf.size", "message": "size may not shrink"}])
    assert _errors(kube_cel.validate(node, {"spec": {"size": 1}})) == []
    grown = kube_cel.validate(node, {"spec": {"size": 3}}, {"spec": {"size": 2}}, updating=True)
    assert _errors(grown) == []
    shrunk = kube_cel.validate(node, {"spec": {"size": 1}}, {"spec": {"size": 2}}, updating=True)
    assert _errors(shrunk) == ['spec: Invalid value: "object": size may not shrink']


def test_an_unchanged_failing_value_is_ratcheted_to_a_warning() -> None:
    node = _node([{"rule": "self.size < 10", "message": "too big"}])
    old = {"spec": {"size": 12}, "status": {"x": 1}}
    kept = kube_cel.validate(node, {"spec": {"size": 12}, "status": {"x": 2}}, old, updating=True)
    assert (kept.errors, kept.warnings) == ([], ['spec: Invalid value: "object": too big'])
    moved = kube_cel.validate(node, {"spec": {"size": 11}}, old, updating=True)
    assert _errors(moved) == ['spec: Invalid value: "object": too big']
    assert _errors(kube_cel.validate(node, {"spec": {"size": 12}})) == [
        'spec: Invalid value: "object": too big'
    ]


def test_message_expression_reason_field_path_and_the_default_message() -> None:
    node = _node(
        [
            {"rule": "self.size < 10", "messageExpression": "'size is ' + self.unit", "message": "m"},
            {
                "rule": "self.mode != 'off'",
                "reason": "FieldValueForbidden",
                "fieldPath": ".mode",
                "message": "no",
            },
            {"rule": "self.size != 11", "reason": "FieldValueRequired"},
            {"rule": "self.size != 11 || self.size == 0"},
        ]
    )
    got = _errors(kube_cel.validate(node, {"spec": {"size": 11, "mode": "off"}}))
    assert got == [
        'spec: Invalid value: "object": m',  # messageExpression fails (no unit): message stands
        "spec.mode: Forbidden: no",
        "spec: Required value: failed rule: self.size != 11",
        'spec: Invalid value: "object": failed rule: self.size != 11 || self.size == 0',
    ]
    node = _node(
        [{"rule": "self.size < 10", "messageExpression": "'size ' + (self.mode == 'a' ? 'A' : 'B')"}]
    )
    assert _errors(kube_cel.validate(node, {"spec": {"size": 11, "mode": "a"}})) == [
        'spec: Invalid value: "object": size A'
    ]


def test_a_missing_field_is_an_evaluation_error_naming_the_key() -> None:
    node = _node([{"rule": "self.mode == 'on'"}])
    assert _errors(kube_cel.validate(node, {"spec": {"size": 1}})) == [
        "spec: Invalid value: \"object\": no such key: mode evaluating rule: self.mode == 'on'"
    ]


def test_a_rule_with_an_unsupported_function_fails_the_crd_load(tmp_path: Path) -> None:
    crd = {
        "group": "example.io",
        "version": "v1",
        "kind": "Site",
        "openAPIV3Schema": {
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "properties": {
                        "url": {"type": "string", "x-kubernetes-validations": [{"rule": "isURL(self)"}]}
                    },
                },
            },
        },
    }
    (tmp_path / "example.io_sites.yaml").write_text(json.dumps(crd))
    with pytest.raises(kube_cel.UnsupportedRule) as info:
        kube_schema.load_crds(tmp_path)
    assert str(info.value) == (
        "example.io_sites.yaml: spec.url x-kubernetes-validations[0]: rule 'isURL(self)' uses isURL, which "
        "this stand-in does not evaluate (supported: all, contains, duration, endsWith, exists, exists_one, "
        "filter, has, matches, size, startsWith)"
    )
    crd["openAPIV3Schema"]["properties"]["spec"]["properties"]["url"]["x-kubernetes-validations"] = [
        {"rule": "url(self).getHost() != ''"}
    ]
    (tmp_path / "example.io_sites.yaml").write_text(json.dumps(crd))
    with pytest.raises(kube_cel.UnsupportedRule, match="uses getHost, url"):
        kube_schema.load_crds(tmp_path)
