"""Rules on the experiment document itself, the same for YAML and JSON, for the CLI and the worker.

The readers (drctl.config.safeload) bound size, depth and expansion; these say what a drill
experiment may hold once read:
- every mapping key is text: YAML 1.1 reads `on`, `yes`, `off`, `no`, `y`, `n` as booleans, so
  keys spelled `on:` and `yes:` would be one key, True, the second silently replacing the first;
- no string (key or value) longer than MAX_TEXT characters: the YAML reader's scalar limit, which
  a JSON experiment (and the plan text the worker gets) never met;
- no integer beyond JSON's exact range (a 73-digit hex literal is a valid YAML int);
- in YAML, no alias (`*name`) and no merge key (`<<`): an activity written once and reused by
  reference can stand where a tolerance or another activity is, looking like what it is not.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_TEXT = 16_384  # validate.EXPERIMENT_LIMITS.max_scalar: the same limit, for every format
MAX_INT = 2**53  # JSON's exact integer range (RFC 8259 section 6)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_CParser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class DocumentRefused(ValueError):
    """The document holds what no drill experiment may. The message names where."""


def _text(where: str, value: str, what: str) -> None:
    if len(value) > MAX_TEXT:
        raise DocumentRefused(f"{where}: {what} longer than {MAX_TEXT:,} characters ({len(value):,})")


def check_document(doc: Any) -> None:
    """Raise DocumentRefused for a non-text key, an over-long string or an out-of-range integer."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, where = stack.pop()
        here = where or "(top level)"
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    raise DocumentRefused(
                        f"{here}: key {key!r} is not text (YAML reads on/off/yes/no/y/n as booleans, and "
                        "two such keys as one): quote it"
                    )
                _text(here, key, "a key")
                stack.append((value, f"{where}.{key[:40]}" if where else key[:40]))
        elif isinstance(node, list):
            stack.extend((item, f"{here}[{i}]") for i, item in enumerate(node))
        elif isinstance(node, str):
            _text(here, node, "a value")
        elif type(node) is int and not -MAX_INT <= node <= MAX_INT:
            raise DocumentRefused(f"{here}: an integer beyond ±2^53 ({len(str(abs(node)))} digits)")


def check_yaml_references(text: str) -> None:
    """Refuse YAML aliases and merge keys (the text is already known to parse within limits)."""
    for ev in yaml.parse(text, Loader=_CParser):
        line = ev.start_mark.line + 1 if ev.start_mark is not None else 0
        if isinstance(ev, yaml.AliasEvent):
            raise DocumentRefused(
                f"line {line}: YAML alias *{ev.anchor} is not allowed in an experiment: write each "
                "activity and value out where it is used"
            )
        if isinstance(ev, yaml.ScalarEvent) and (
            # Plain style is None from PyYAML's parser and "" from libyaml's.
            ev.tag == _MERGE_TAG or (ev.value == "<<" and not ev.style and ev.tag is None)
        ):
            raise DocumentRefused(
                f"line {line}: YAML merge key << is not allowed in an experiment: write the keys out"
            )
