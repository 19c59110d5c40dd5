"""PATCH as the API server applies it, chosen by Content-Type (apiserver endpoints/handlers/patch.go).

- application/json-patch+json: an RFC 6902 array of operations; any other body is a 400;
- application/merge-patch+json: RFC 7386, so a list is replaced whole and null deletes a key;
- application/strategic-merge-patch+json: built-in kinds only (a custom resource gets 415), lists
  merged by the `x-kubernetes-patch-merge-key` of the kind's OpenAPI schema (containers and env by
  name, ports by containerPort), `$patch: delete|replace` honoured;
- anything else, including no Content-Type, is 415 Unsupported Media Type.
Server-side apply (application/apply-patch+yaml) is refused too: drctl does not use it.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from drctl.devstack import kube_schema
from drctl.devstack.label_selector import ApiError

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
_SUPPORTED = (JSON_PATCH, MERGE_PATCH, STRATEGIC)


def content_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def check_type(ctype: str, builtin: bool) -> None:
    """415 for a patch type the server does not accept for this resource."""
    if ctype not in _SUPPORTED or (ctype == STRATEGIC and not builtin):
        accepted = _SUPPORTED if builtin else (JSON_PATCH, MERGE_PATCH)
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}"
            if ctype
            else "the request has no Content-Type; accepted media types include: " + ", ".join(accepted),
        )


def apply(ctype: str, old: dict[str, Any], patch: Any) -> dict[str, Any]:
    """The object `old` with `patch` applied the way `ctype` says."""
    check_type(ctype, kube_schema.is_builtin(old.get("apiVersion", ""), old.get("kind", "")))
    if ctype == JSON_PATCH:
        if not isinstance(patch, list) or not all(isinstance(op, dict) for op in patch):
            raise ApiError(
                400,
                "BadRequest",
                "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
                if isinstance(patch, dict)
                else "a JSON patch must be an array of operations",
            )
        try:
            out = jsonpatch.apply_patch(old, patch)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise ApiError(
                422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
            ) from None
        if not isinstance(out, dict):
            raise ApiError(422, "Invalid", "a JSON patch must leave an object")
        return out
    if not isinstance(patch, dict):
        raise ApiError(
            400, "BadRequest", f"json: cannot unmarshal {type(patch).__name__} into a {ctype} object"
        )
    if ctype == MERGE_PATCH:
        return merge_patch(old, patch)
    schema = kube_schema.schema_of(old["apiVersion"], old["kind"]) or {}
    return _strategic(old, patch, schema)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _strategic(target: Any, patch: dict[str, Any], schema: dict[str, Any]) -> Any:
    schema = kube_schema.resolve(schema)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    props = schema.get("properties") or {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue  # ordering and retain directives: the merged result does not depend on them here
        sub = props.get(key) or (
            schema["additionalProperties"] if isinstance(schema.get("additionalProperties"), dict) else {}
        )
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = _strategic(out.get(key), value, sub)
        elif isinstance(value, list):
            out[key] = _strategic_list(out.get(key), value, kube_schema.resolve(sub))
        else:
            out[key] = value
    return out


def _strategic_list(current: Any, patch: list[Any], schema: dict[str, Any]) -> list[Any]:
    strategy = schema.get("x-kubernetes-patch-strategy", "")
    key = schema.get("x-kubernetes-patch-merge-key")
    if "merge" not in strategy.split(",") or not isinstance(current, list):
        return [x for x in copy.deepcopy(patch) if not (isinstance(x, dict) and x.get("$patch"))]
    if key is None:  # a merged list of scalars (finalizers): a union that keeps the current order
        return list(current) + [x for x in patch if x not in current]
    items = kube_schema.resolve(schema.get("items") or {})
    out = [copy.deepcopy(x) for x in current]
    for item in patch:
        if not isinstance(item, dict):
            raise ApiError(400, "BadRequest", f"strategic merge list item must be an object with {key!r}")
        at = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if at is not None:
                del out[at]
        elif at is None:
            out.append(_strategic({}, item, items))
        else:
            out[at] = _strategic(out[at], item, items)
    return out
