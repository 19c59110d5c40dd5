"""The fleet config's JSON Schema, from the pydantic models, and the reference page made from it.

`drctl config schema` prints the schema; docs/fleet-config.schema.json and docs/config-reference.md
are generated from it (tests/units/test_config_reference.py keeps both equal to the models), and the
example configs name the schema file on their first line so editors complete and check them.
"""

from __future__ import annotations

import json
from typing import Any

from drctl.config.schema import FleetConfig

SCHEMA_ID = "https://github.com/drctl/drctl/blob/main/docs/fleet-config.schema.json"
MODELINE = "# yaml-language-server: $schema=../docs/fleet-config.schema.json"


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) a fleet config file is checked against."""
    schema = FleetConfig.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def _deref(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    target = defs[ref.rsplit("/", 1)[-1]]
    return {**target, **{k: v for k, v in node.items() if k != "$ref"}}


def _type_of(node: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in node:
        return _deref(node, defs).get("title", "object")
    if "enum" in node:
        return " | ".join(f"`{v}`" for v in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    for key in ("anyOf", "oneOf"):
        if key in node:
            return " | ".join(_type_of(alt, defs) for alt in node[key])
    kind = node.get("type", "any")
    if kind == "array":
        return f"list of {_type_of(node.get('items', {}), defs)}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type_of(node['additionalProperties'], defs)}"
    return str(kind)


def _bounds(node: dict[str, Any]) -> str:
    parts = []
    for key, sign in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
    ):
        if key in node:
            parts.append(f"{sign} {node[key]}")
    for key, word in (("minLength", "length >="), ("maxLength", "length <="), ("pattern", "matches")):
        if key in node:
            parts.append(f"{word} `{node[key]}`")
    return ", ".join(parts)


def _object_of(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any] | None:
    """The object schema a field holds (directly, optionally, or as list items), if any."""
    node = _deref(node, defs)
    if "properties" in node:
        return node
    for key in ("anyOf", "oneOf"):
        objects = [o for o in (_object_of(alt, defs) for alt in node.get(key, [])) if o is not None]
        if len(objects) == 1:
            return objects[0]
    if node.get("type") == "array":
        return _object_of(node.get("items", {}), defs)
    return None


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown() -> str:
    """docs/config-reference.md: every field, its type, default, bounds and description."""
    schema = json_schema()
    defs = schema.get("$defs", {})
    lines = [
        "# Fleet config reference",
        "",
        "Generated from the pydantic models by `drctl config schema -o markdown`; do not edit by hand",
        "(tests/units/test_config_reference.py fails when it differs). The same schema as JSON, for editors:",
        "[fleet-config.schema.json](fleet-config.schema.json). Every example config's first line names it:",
        "",
        "```yaml",
        MODELINE,
        "```",
        "",
    ]
    sections: list[tuple[str, dict[str, Any]]] = [("(top level)", schema)]
    seen: set[int] = set()
    while sections:
        path, node = sections.pop(0)
        required = set(node.get("required", []))
        lines += [f"## `{path}`" if path != "(top level)" else "## Top level", ""]
        if node.get("description") and path != "(top level)":
            lines += [_cell(node["description"]), ""]
        lines += ["| field | type | default | bounds | description |", "|---|---|---|---|---|"]
        for name, field in node.get("properties", {}).items():
            default = (
                "required"
                if name in required
                else f"`{json.dumps(field['default'])}`"
                if "default" in field
                else ""
            )
            desc = field.get("description") or _deref(field, defs).get("description", "")
            cells = [f"`{name}`", _type_of(field, defs), default, _bounds(field), desc]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
            child = _object_of(field, defs)
            sub = name if path == "(top level)" else f"{path}.{name}"
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                sections.append((sub + ("[]" if _deref(field, defs).get("type") == "array" else ""), child))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
