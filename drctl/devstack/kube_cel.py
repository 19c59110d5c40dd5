"""CRD validation rules (`x-kubernetes-validations`), evaluated as the API server evaluates them.

As apiextensions-apiserver's schema/cel package does: each rule runs at its schema node with `self`
bound to the value there (null values are not validated); a transition rule (one naming `oldSelf`)
runs only on an update whose old value correlates (the same key of an object, the same map keys in
a `x-kubernetes-list-type: map` list), and is skipped on create. A rule that is not true fails with
`messageExpression`, else `message`, else "failed rule: <rule>", at `fieldPath` below the node when
given, as the field error `reason` names (FieldValueInvalid unless Forbidden, Required or Duplicate).
On update, a failing rule without `oldSelf` whose value is unchanged is ratcheted: a warning, not an
error (CRDValidationRatcheting, on by default since Kubernetes 1.30).

Rules are compiled with cel-python when the CRD loads. Only the functions and macros listed in
SUPPORTED are allowed: they are the ones the vendored CRDs use, and cel-python implements them as
Kubernetes' cel-go does (matches() is RE2 there too). Any other function, for example Kubernetes'
isURL() or url(), fails the CRD load with UnsupportedRule rather than passing an object unchecked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import celpy
import lark
from celpy import celtypes

# Property names CEL cannot use as they are: apiserver/pkg/cel/escaping.go.
_RESERVED = frozenset(
    "true false null in as break const continue else for function if import let loop package "
    "namespace return var void while".split()
)
SUPPORTED = frozenset(
    {"all", "exists", "exists_one", "filter", "has", "size"}  # macros and size()
    | {"contains", "startsWith", "endsWith", "matches", "duration"}
)
_REASONS = {
    None: "FieldValueInvalid",
    "FieldValueInvalid": "FieldValueInvalid",
    "FieldValueForbidden": "FieldValueForbidden",
    "FieldValueRequired": "FieldValueRequired",
    "FieldValueDuplicate": "FieldValueDuplicate",
}
_ENV = celpy.Environment()


class UnsupportedRule(ValueError):
    """A CRD rule this stand-in cannot evaluate faithfully: the CRD must not load."""


@dataclass(frozen=True)
class FieldError:
    """One k8s.io/apimachinery field.Error: `str()` is its Error(), `body()` its ErrorBody()."""

    type: str  # FieldValueInvalid, FieldValueForbidden, ...
    field: str
    detail: str
    # The value Invalid and Duplicate show, quoted (for CEL rules, the schema type); None shows none
    # (the JSON Schema checks' messages name the value themselves).
    value: str | None = ""

    def body(self) -> str:
        shown = "" if self.value is None else f': "{self.value}"'
        head = {
            "FieldValueForbidden": "Forbidden",
            "FieldValueRequired": "Required value",
            "FieldValueDuplicate": f"Duplicate value{shown}",
        }.get(self.type, f"Invalid value{shown}")
        return f"{head}: {self.detail}" if self.detail else head

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def escape(name: str) -> str | None:
    """A property name as CEL sees it (`namespace` -> `__namespace__`), or None if it cannot."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    if not re.fullmatch(r"[A-Za-z0-9_./-]+", name):
        return None
    names = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
    return re.sub(r"__|[./-]", lambda m: names[m.group(0)], name)


@dataclass(frozen=True)
class Rule:
    spec: dict[str, Any]  # the rule as the CRD has it
    program: Any
    message: Any  # the compiled messageExpression, or None
    uses_old_self: bool
    field_path: str  # the normalized fieldPath ("" for none)

    @property
    def error_string(self) -> str:  # ruleErrorString
        return str(self.spec.get("message") or self.spec["rule"]).strip()


@dataclass
class Node:
    """The compiled rules at one schema node, and the children that lead to more."""

    schema: dict[str, Any]
    rules: list[Rule] = field(default_factory=list)
    properties: dict[str, Node] = field(default_factory=dict)
    items: Node | None = None
    additional: Node | None = None


def _compile(source: str, where: str) -> tuple[Any, set[str]]:
    try:
        ast = _ENV.compile(source)
    except Exception as exc:  # celpy raises its parse errors as several types
        raise UnsupportedRule(f"{where}: cannot parse CEL {source!r}: {exc}") from None
    calls, idents = set(), set()
    for node in ast.iter_subtrees():
        tokens = [str(c) for c in node.children if isinstance(c, lark.Token)]
        if node.data in ("member_dot_arg", "ident_arg", "dot_ident_arg") and tokens:
            calls.add(tokens[0])
        elif node.data in ("ident", "dot_ident") and tokens:
            idents.add(tokens[0])
    unsupported = sorted(calls - SUPPORTED)
    if unsupported:
        raise UnsupportedRule(
            f"{where}: rule {source!r} uses {', '.join(unsupported)}, which this stand-in does not "
            f"evaluate (supported: {', '.join(sorted(SUPPORTED))})"
        )
    return _ENV.program(ast), idents


def _field_path(path: str, schema: dict[str, Any], where: str) -> str:
    """A rule's fieldPath (`.a.b`, `.m['k']`) as field.Path prints it, checked against the schema."""
    out = ""
    for name, key in re.findall(r"\.([^.\[\]]+)|\['((?:[^'\\]|\\.)*)'\]", path) or [(None, None)]:
        part = name if name is not None and name != "" else key
        if part is None:
            raise UnsupportedRule(f"{where}: fieldPath {path!r} is not a valid JSON path")
        props = schema.get("properties")
        if props is not None and part in props:
            out += f".{part}" if out else part
            schema = props[part]
        elif props is None and isinstance(schema.get("additionalProperties"), dict):
            out += f"[{part}]"
            schema = schema["additionalProperties"]
        else:
            raise UnsupportedRule(f"{where}: fieldPath {path!r} does not refer to a valid field")
    return out


def compile_schema(schema: dict[str, Any], where: str = "") -> Node | None:
    """Compile every rule under `schema`; None if there are none. Raises UnsupportedRule."""
    node = Node(schema=schema)
    for i, spec in enumerate(schema.get("x-kubernetes-validations") or []):
        at = f"{where or '<root>'} x-kubernetes-validations[{i}]"
        if spec.get("optionalOldSelf"):
            raise UnsupportedRule(f"{at}: optionalOldSelf needs CEL optionals, which cel-python lacks")
        program, idents = _compile(spec["rule"], at)
        message = _compile(spec["messageExpression"], at)[0] if spec.get("messageExpression") else None
        path = _field_path(spec["fieldPath"], schema, at) if spec.get("fieldPath") else ""
        if spec.get("reason") not in _REASONS:
            raise UnsupportedRule(f"{at}: unknown reason {spec.get('reason')!r}")
        node.rules.append(Rule(spec, program, message, "oldSelf" in idents, path))
    for name, prop in (schema.get("properties") or {}).items():
        child = compile_schema(prop, f"{where}.{name}" if where else name)
        if child is not None:
            node.properties[name] = child
    if isinstance(schema.get("items"), dict):
        node.items = compile_schema(schema["items"], f"{where}[*]")
    if isinstance(schema.get("additionalProperties"), dict):
        node.additional = compile_schema(schema["additionalProperties"], f"{where}[*]")
    has_any = node.rules or node.properties or node.items or node.additional
    return node if has_any else None


def to_cel(value: Any, schema: dict[str, Any]) -> Any:
    """A JSON value as the CEL value the API server binds: escaped property names, typed strings."""
    if value is None:
        return None
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-int-or-string"):
        return celpy.json_to_cel(value)
    if isinstance(value, dict):
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        if props is not None:
            return celtypes.MapType(
                {
                    celtypes.StringType(e): to_cel(v, props[k])
                    for k, v in value.items()
                    if k in props and (e := escape(k)) is not None
                }
            )
        inner = extra if isinstance(extra, dict) else {}
        return celtypes.MapType({celtypes.StringType(k): to_cel(v, inner) for k, v in value.items()})
    if isinstance(value, list):
        return celtypes.ListType([to_cel(v, _items(schema)) for v in value])
    if isinstance(value, str) and schema.get("format") == "duration":
        return celtypes.DurationType(value)
    if isinstance(value, str) and schema.get("format") in ("date", "date-time"):
        return celtypes.TimestampType(value)
    return celpy.json_to_cel(value)


def _items(schema: dict[str, Any]) -> dict[str, Any]:
    items = schema.get("items")
    return items if isinstance(items, dict) else {}


def _map_keys(schema: dict[str, Any]) -> list[str] | None:
    return list(schema.get("x-kubernetes-list-map-keys") or []) if _is_map_list(schema) else None


def _is_map_list(schema: dict[str, Any]) -> bool:
    return schema.get("x-kubernetes-list-type") == "map"


def _old_item(schema: dict[str, Any], item: Any, old: Any) -> Any:
    """The old element a map-list element correlates with (same map keys); None for other lists."""
    keys = _map_keys(schema)
    if keys is None or not isinstance(old, list) or not isinstance(item, dict):
        return None
    want = [item.get(k) for k in keys]
    return next((o for o in old if isinstance(o, dict) and [o.get(k) for k in keys] == want), None)


@dataclass(frozen=True)
class _Ratchet:
    """common.CorrelatedObject, reduced to what ratcheting asks: is this value its old value?"""

    node: tuple[Any, Any, dict[str, Any]] | None = None  # (value, old, schema) when correlated
    parent: tuple[Any, Any, dict[str, Any]] | None = None

    def key(self, name: str, schema: dict[str, Any]) -> _Ratchet:
        if self.node is None:
            return self
        value, old, _ = self.node
        found = isinstance(value, dict) and isinstance(old, dict) and name in value and name in old
        return _Ratchet((value[name], old[name], schema) if found else None, self.node)

    def index(self, i: int, schema: dict[str, Any], items: dict[str, Any]) -> _Ratchet:
        if self.node is None:
            return self
        value, old, _ = self.node
        prior = _old_item(schema, value[i], old)
        return _Ratchet((value[i], prior, items) if prior is not None else None, self.node)

    def unchanged(self) -> bool:
        here = self.node if self.node is not None else self.parent
        return here is not None and _equal(here[0], here[1], here[2])


def _equal(value: Any, old: Any, schema: dict[str, Any]) -> bool:
    """CachedDeepEqual: map-list elements compare by their keys, in any order."""
    if isinstance(value, dict) and isinstance(old, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        inner = extra if isinstance(extra, dict) else {}
        return value.keys() == old.keys() and all(
            _equal(v, old[k], props.get(k, inner)) for k, v in value.items()
        )
    if isinstance(value, list) and isinstance(old, list):
        items = _items(schema)
        if len(value) != len(old):
            return False
        if _is_map_list(schema):
            return all(_equal(v, _old_item(schema, v, old), items) for v in value)
        return all(_equal(v, o, items) for v, o in zip(value, old, strict=True))
    return bool(value == old)


def _eval_error(exc: Exception, rule: Rule) -> str:
    text = str(exc.args[0]) if exc.args else str(exc)
    missing = re.search(r"no such member in mapping: '([^']*)'", repr(exc.args))
    if missing:
        text = f"no such key: {missing.group(1)}"
    elif "no matching overload" in text or "no such overload" in text:
        return (
            f"'no such overload': call arguments did not match a supported operator, function or macro "
            f"signature for rule: {rule.error_string}"
        )
    return f"{text} evaluating rule: {rule.error_string}"


def _message(rule: Rule, activation: dict[str, Any]) -> str:
    default = rule.spec.get("message", "").strip() or f"failed rule: {rule.error_string}"
    if rule.message is None:
        return default
    try:
        text = rule.message.evaluate(activation)
    except Exception:  # the API server logs it and falls back to message
        return default
    trimmed = str(text).strip() if isinstance(text, str) else ""
    return trimmed if trimmed and "\n" not in trimmed else default


@dataclass
class Outcome:
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _join(path: str, part: str, index: bool = False) -> str:
    if index:
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else part


def validate(node: Node | None, value: Any, old: Any = None, updating: bool = False) -> Outcome:
    """Run every rule of `node` over `value` (`old` on update); field paths start at the root."""
    out = Outcome()
    start = _Ratchet((value, old, node.schema)) if updating and node is not None else _Ratchet()
    _walk(node, value, old, "", start, out)
    return out


def _walk(node: Node | None, value: Any, old: Any, path: str, ratchet: _Ratchet, out: Outcome) -> None:
    if node is None or value is None:
        return
    if node.rules:
        _rules(node, value, old, path, ratchet, out)
    schema = node.schema
    if isinstance(value, list) and node.items is not None:
        for i, item in enumerate(value):
            r = ratchet.index(i, schema, node.items.schema)
            _walk(node.items, item, _old_item(schema, item, old), _join(path, str(i), True), r, out)
    elif isinstance(value, dict):
        olds = old if isinstance(old, dict) else {}
        for key, item in value.items():
            child = node.properties.get(key)
            if child is not None:
                _walk(child, item, olds.get(key), _join(path, key), ratchet.key(key, child.schema), out)
            elif node.additional is not None and "properties" not in schema:
                r = ratchet.key(key, node.additional.schema)
                _walk(node.additional, item, olds.get(key), _join(path, key, True), r, out)


def _rules(node: Node, value: Any, old: Any, path: str, ratchet: _Ratchet, out: Outcome) -> None:
    kind = str(node.schema.get("type", ""))
    activation = {"self": to_cel(value, node.schema)}
    if old is not None:
        activation["oldSelf"] = to_cel(old, node.schema)
    where = path or "<nil>"
    for rule in node.rules:
        if rule.uses_old_self and old is None:
            continue  # a transition rule needs a correlated old value
        try:
            result = rule.program.evaluate(activation)
        except Exception as exc:  # CELEvalError, and Python errors celpy lets through
            out.errors.append(FieldError("FieldValueInvalid", where, _eval_error(exc, rule), kind))
            continue
        if isinstance(result, celtypes.BoolType) and bool(result):
            continue
        at = _join(path, rule.field_path) if rule.field_path else where
        error = FieldError(_REASONS[rule.spec.get("reason")], at, _message(rule, activation), kind)
        if error.type == "FieldValueDuplicate":
            error = FieldError(error.type, at, "", kind)
        if not rule.uses_old_self and ratchet.unchanged():
            out.warnings.append(str(error))
        else:
            out.errors.append(error)
