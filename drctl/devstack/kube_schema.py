"""Schema checks of the emulated API server: every object written is checked against its real schema.

Built-in kinds use the Kubernetes OpenAPI definitions that `kubernetes-validate` carries offline;
custom resources use their upstream CRD `openAPIV3Schema`, vendored in `crds/` (see its README).
Unknown fields are reported as the API server's strict decoder reports them (`spec.x`,
`spec.containers[0].x`), so the caller can refuse them (fieldValidation=Strict) or warn.
A custom resource is defaulted from its schema first (null fields the schema does not allow are
pruned), and its CEL rules (`x-kubernetes-validations`, kube_cel.py) run after the schema check,
unless that found a type, required, enum or size error, as in the API server's CR strategy.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from drctl.devstack import kube_cel
from drctl.devstack.kube_cel import FieldError
from drctl.devstack.label_selector import ApiError

_K8S_DEFS = "kubernetes-json-schema/v1.37.0-local/_definitions.json"
_CRDS = Path(__file__).parent / "crds"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


@functools.cache
def _defs() -> dict[str, Any]:
    ref = importlib.resources.files("kubernetes_validate").joinpath(_K8S_DEFS)
    return dict(json.loads(ref.read_text())["$defs"])


@functools.cache
def _builtin_names() -> dict[tuple[str, str], str]:
    """(apiVersion, kind) -> definition name, from each definition's x-kubernetes-group-version-kind."""
    out: dict[tuple[str, str], str] = {}
    for name, schema in _defs().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            api = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
            out[(api, gvk["kind"])] = name
    return out


def _nullable(schema: Any) -> Any:
    """OpenAPI v3 `nullable: true` as JSON Schema: a null value is allowed beside the type."""
    if isinstance(schema, list):
        return [_nullable(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _nullable(v) for k, v in schema.items()}
    if out.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def load_crds(directory: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The CRDs vendored in `directory`, their CEL rules compiled (kube_cel.UnsupportedRule if not)."""
    out = {}
    for path in sorted(directory.glob("*.yaml")):
        # libyaml's loader where built (about 20 times faster on these 230 kB), else the pure one.
        crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        schema = _nullable(crd["openAPIV3Schema"])
        # The API server checks a custom resource's metadata as ObjectMeta, whatever the CRD says.
        schema["properties"]["metadata"] = {"$ref": f"#/$defs/{_OBJECT_META}"}
        try:
            cel = kube_cel.compile_schema(schema)
        except kube_cel.UnsupportedRule as exc:
            raise kube_cel.UnsupportedRule(f"{path.name}: {exc}") from None
        out[(f"{crd['group']}/{crd['version']}", crd["kind"])] = {
            **crd,
            "openAPIV3Schema": schema,
            "cel": cel,
        }
    return out


@functools.cache
def _crds() -> dict[tuple[str, str], dict[str, Any]]:
    return load_crds(_CRDS)


def default(value: Any, schema: dict[str, Any]) -> None:
    """Structural defaulting, in place: apiextensions-apiserver's schema/defaulting.

    A property with a `default` that is absent, or null where the schema does not allow null, gets
    a copy of it (then defaulted in turn); a null that is neither allowed nor defaulted is pruned.
    """
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, prop in props.items():
            allows_null = bool(prop.get("nullable"))
            if "default" in prop and (key not in value or (value[key] is None and not allows_null)):
                value[key] = copy.deepcopy(prop["default"])
            elif key in value and value[key] is None and not allows_null:
                del value[key]
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                default(item, props[key])
            elif isinstance(extra, dict):
                default(item, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(item, schema["items"])


def is_builtin(api_version: str, kind: str) -> bool:
    return (api_version, kind) in _builtin_names()


def status_subresource(api_version: str, kind: str) -> bool | None:
    """Whether a custom resource has a status subresource; None for kinds that are not CRDs here."""
    crd = _crds().get((api_version, kind))
    return None if crd is None else "status" in (crd.get("subresources") or {})


def _reachable(schema: Any, out: dict[str, Any]) -> dict[str, Any]:
    """The definitions `schema` refers to, transitively: a validator over all ~900 builds for seconds."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.rsplit("/", 1)[-1] not in out:
            name = ref.rsplit("/", 1)[-1]
            out[name] = _defs()[name]
            _reachable(out[name], out)
        for value in schema.values():
            _reachable(value, out)
    elif isinstance(schema, list):
        for value in schema:
            _reachable(value, out)
    return out


@functools.cache
def schema_of(api_version: str, kind: str) -> dict[str, Any] | None:
    """The root schema of a kind (with `$defs` for references), or None if no schema is known."""
    crd = _crds().get((api_version, kind))
    root: dict[str, Any]
    if crd is not None:
        root = dict(crd["openAPIV3Schema"])
    elif (api_version, kind) in _builtin_names():
        root = {"$ref": f"#/$defs/{_builtin_names()[(api_version, kind)]}"}
    else:
        return None
    return {**root, "$defs": _reachable(root, {})}


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    """Follow `$ref`s (all of them local `#/$defs/...`) to the schema they name."""
    for _ in range(20):
        ref = schema.get("$ref")
        if not ref:
            return schema
        schema = _defs()[ref.rsplit("/", 1)[-1]]
    raise ValueError(f"reference loop at {schema.get('$ref')}")


def _unknown(schema: dict[str, Any], value: Any, path: str, out: list[str]) -> None:
    schema = resolve(schema)
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if props is not None and key in props:
                _unknown(props[key], item, where, out)
            elif isinstance(extra, dict):
                _unknown(extra, item, where, out)
            elif props is not None or extra is False:
                out.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _unknown(schema["items"], item, f"{path}[{i}]", out)


def unknown_fields(obj: dict[str, Any]) -> list[str]:
    """Paths of the fields the kind's schema does not know, as the strict decoder names them."""
    schema = schema_of(obj.get("apiVersion", ""), obj.get("kind", ""))
    out: list[str] = []
    if schema is not None:
        _unknown(schema, obj, "", out)
    return out


@functools.cache
def _validator(api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    schema = schema_of(api_version, kind)
    if schema is None:
        return None
    return jsonschema.Draft202012Validator(schema)  # every $ref is local: #/$defs/...


# The schema errors that make the API server skip CEL rules (customresource strategy's
# hasBlockingErr): type, required, enum and size limits, by the JSON Schema keyword that found them.
_BLOCKING = {"type", "required", "enum", "maxLength", "maxItems", "maxProperties"}
_UNCHECKED = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)


def check(obj: dict[str, Any], field_validation: str, old: dict[str, Any] | None = None) -> list[str]:
    """Refuse an object its schema or CEL rules refuse (422); return the warnings a write should carry.

    field_validation is the request's `fieldValidation`: Strict refuses unknown fields (400, as the
    API server's strict decoding error), Warn (the default) and Ignore accept them. `old` is the
    stored object on an update (for transition rules and ratcheting). A custom resource is
    defaulted in place first, as the API server stores it.
    """
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    crd = _crds().get((api_version, kind))
    if crd is not None:
        default(obj, crd["openAPIV3Schema"])
    unknown = unknown_fields(obj)
    if unknown and field_validation == "Strict":
        raise ApiError(
            400, "BadRequest", "strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown)
        )
    warnings = [f'unknown field "{u}"' for u in unknown] if field_validation != "Ignore" else []
    errors: list[FieldError] = []
    blocking = False
    validator = _validator(api_version, kind)
    if validator is not None:
        for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
            errors.append(FieldError("FieldValueInvalid", _path(e.absolute_path), e.message, None))
            blocking = blocking or e.validator in _BLOCKING
    if crd is not None and crd["cel"] is not None:
        if blocking:
            errors.append(FieldError("FieldValueInvalid", "<nil>", _UNCHECKED, "null"))
        else:
            outcome = kube_cel.validate(crd["cel"], obj, old, updating=old is not None)
            errors.extend(outcome.errors)
            warnings.extend(outcome.warnings)
    if errors:
        raise invalid(api_version, kind, (obj.get("metadata") or {}).get("name", ""), errors)
    return warnings


def invalid(api_version: str, kind: str, name: str, errors: list[FieldError]) -> ApiError:
    """A 422 as errors.NewInvalid builds it: the qualified kind, each error once, a cause each."""
    group = api_version.rpartition("/")[0]
    unique = list(dict.fromkeys(str(e) for e in errors))
    text = unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
    causes = [{"reason": e.type, "message": e.body(), "field": e.field} for e in errors]
    qualified = f"{kind}.{group}" if group else kind
    details = {"name": name, "group": group, "kind": kind, "causes": causes}
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details)


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"
