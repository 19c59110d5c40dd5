"""Bounded parsing of YAML and JSON documents that come from users: fleet configs and experiments.

A document is refused, with the line where that is known, before it can cost more than its limits:
- more bytes than `max_bytes` (read at most `max_bytes + 1` of a file), or bytes that are not UTF-8;
- nesting deeper than `max_depth` (checked while composing, before Python's own recursion limit);
- more nodes than `max_nodes` once every alias is expanded, so a "billion laughs" alias bomb is
  refused after reading it, not after building it; a recursive alias is refused outright;
- a duplicate mapping key, naming both lines (PyYAML and json silently keep the last one, so two
  readers of one file could see different values);
- a scalar longer than `max_scalar` characters, or an integer of more than `_MAX_INT_DIGITS` digits
  (Python refuses to convert one of over 4,300 digits, with a ValueError from deep in the loader);
- JSON's NaN and Infinity, which no drctl field means;
- a key or value that is not UTF-8 text: a lone surrogate escape (`"\\ud800"` in JSON or double-quoted
  YAML) decodes to a Python str that cannot be encoded, so printing or sending it would fail later.

The composer here is iterative over PyYAML's event stream (the C parser when it is there), so neither
depth nor size reaches a recursive function before the limits are checked.
"""

from __future__ import annotations

import errno
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drctl.config.bounded_read import FileRefused, read_regular_file

_MAX_INT_DIGITS = 40
_INT_TAG = "tag:yaml.org,2002:int"
_NUMBERISH = re.compile(rf"[-+]?[0-9_]{{{_MAX_INT_DIGITS + 1},}}")
# libyaml's parser, where PyYAML has it, for large fleet configs; it reports errors in other words.
_CParser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_depth: int = 32
    max_nodes: int = 100_000
    max_scalar: int = 65_536


class DocumentError(ValueError):
    """A document refused by a limit or a syntax rule. `line` is 1-based where it is known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _utf8(s: str) -> bool:
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_NOT_UTF8 = "a string that is not UTF-8 text (a lone surrogate such as \\ud800)"


def _unencodable(doc: Any) -> str | None:
    """Where in `doc` a key or string value that is not UTF-8 text is, or None."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if not _utf8(node):
                return where or "(top level)"
        elif isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and not _utf8(key):
                    return f"a key in {where or '(top level)'}"
                name = str(key)[:40]
                stack.append((value, f"{where}.{name}" if where else name))
        elif isinstance(node, list):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(node))
    return None


def read_bounded(path: str | Path, limits: Limits, what: str = "document") -> bytes:
    """At most `limits.max_bytes` of a regular file (drctl.config.bounded_read): a FIFO, a device
    or a directory is refused before it is opened, and a larger file without reading all of it.

    Raises OSError (its `strerror` the reason) for a file that cannot be read or is not a regular
    file, and DocumentError for one over the size limit.
    """
    try:
        return read_regular_file(path, max_bytes=limits.max_bytes, what=what)
    except FileRefused as exc:
        if exc.errno == errno.EFBIG:
            raise DocumentError(f"larger than the {limits.max_bytes:,}-byte limit") from None
        raise


def decode(data: bytes | str, limits: Limits) -> str:
    if isinstance(data, str):
        if len(data) > limits.max_bytes:
            raise DocumentError(f"larger than the {limits.max_bytes:,}-byte limit")
        try:
            data.encode("utf-8")
        except UnicodeEncodeError as exc:  # a str handed over in code, e.g. a plan's text
            raise DocumentError("not UTF-8 text", data[: exc.start].count("\n") + 1) from None
        return data
    if len(data) > limits.max_bytes:
        raise DocumentError(f"larger than the {limits.max_bytes:,}-byte limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DocumentError(f"not UTF-8 text (byte {exc.start})", line) from None


class _Composer:
    """Builds PyYAML nodes from events, counting expanded size and depth as it goes."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.resolver = yaml.SafeLoader("")
        self.anchors: dict[str, tuple[yaml.Node, int]] = {}
        self.open_anchors: set[str] = set()
        self.total = 0

    def _count(self, n: int, mark: Any) -> None:
        self.total += n
        if self.total > self.limits.max_nodes:
            raise DocumentError(
                f"more than {self.limits.max_nodes:,} values once aliases are expanded", _line(mark)
            )

    def compose(self, events: Any) -> yaml.Node | None:
        # stack entries: [node, expanded size, anchor, pending key for duplicate checks]
        stack: list[list[Any]] = []
        root: yaml.Node | None = None
        documents = 0
        for ev in events:
            if isinstance(ev, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise DocumentError("more than one YAML document", _line(ev.start_mark))
                continue
            if isinstance(ev, yaml.StreamStartEvent | yaml.StreamEndEvent | yaml.DocumentEndEvent):
                continue
            node: yaml.Node | None = None
            size = 0
            if isinstance(ev, yaml.AliasEvent):
                if ev.anchor in self.open_anchors:
                    raise DocumentError(f"recursive alias *{ev.anchor}", _line(ev.start_mark))
                if ev.anchor not in self.anchors:
                    raise DocumentError(f"alias *{ev.anchor} names no anchor", _line(ev.start_mark))
                node, size = self.anchors[ev.anchor]
                self._count(size, ev.start_mark)
            elif isinstance(ev, yaml.ScalarEvent):
                node = self._scalar(ev)
                size = 1
                self._count(1, ev.start_mark)
                if ev.anchor is not None:
                    self.anchors[ev.anchor] = (node, size)
            elif isinstance(ev, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                if len(stack) >= self.limits.max_depth:
                    raise DocumentError(
                        f"nested deeper than {self.limits.max_depth} levels", _line(ev.start_mark)
                    )
                self._count(1, ev.start_mark)
                if isinstance(ev, yaml.SequenceStartEvent):
                    tag = ev.tag or self.resolver.resolve(yaml.SequenceNode, None, ev.implicit)
                    new: yaml.Node = yaml.SequenceNode(tag, [], ev.start_mark, None, flow_style=ev.flow_style)
                else:
                    tag = ev.tag or self.resolver.resolve(yaml.MappingNode, None, ev.implicit)
                    new = yaml.MappingNode(tag, [], ev.start_mark, None, flow_style=ev.flow_style)
                if ev.anchor is not None:
                    self.open_anchors.add(ev.anchor)
                stack.append([new, 1, ev.anchor, None, {}])
                continue
            elif isinstance(ev, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                node, size, anchor, _, _ = stack.pop()
                node.end_mark = ev.end_mark
                if anchor is not None:
                    self.open_anchors.discard(anchor)
                    self.anchors[anchor] = (node, size)
            if node is None:
                continue
            if not stack:
                root = node
                continue
            self._attach(stack[-1], node, size)
        return root

    def _scalar(self, ev: Any) -> yaml.Node:
        if len(ev.value) > self.limits.max_scalar:
            raise DocumentError(
                f"a value longer than {self.limits.max_scalar:,} characters", _line(ev.start_mark)
            )
        if not _utf8(ev.value):  # PyYAML's own parser turns "\\ud800" into a lone surrogate
            raise DocumentError(_NOT_UTF8, _line(ev.start_mark))
        tag = ev.tag or self.resolver.resolve(yaml.ScalarNode, ev.value, ev.implicit)
        if (tag == _INT_TAG or tag is None) and _NUMBERISH.fullmatch(ev.value):
            raise DocumentError(f"a number of more than {_MAX_INT_DIGITS} digits", _line(ev.start_mark))
        return yaml.ScalarNode(tag, ev.value, ev.start_mark, ev.end_mark, style=ev.style)

    def _attach(self, parent: list[Any], node: yaml.Node, size: int) -> None:
        parent[1] += size
        container = parent[0]
        if isinstance(container, yaml.SequenceNode):
            container.value.append(node)
            return
        if parent[3] is None:
            parent[3] = node
            return
        key, parent[3] = parent[3], None
        if isinstance(key, yaml.ScalarNode) and key.value != "<<":
            seen: dict[str, int] = parent[4]
            line = _line(key.start_mark) or 0
            if key.value in seen:
                raise DocumentError(
                    f"duplicate key {key.value[:80]!r} (first at line {seen[key.value]}, again at line {line})",
                    line,
                )
            seen[key.value] = line
        container.value.append((key, node))


def _line(mark: Any) -> int | None:
    return mark.line + 1 if mark is not None else None


def load_yaml(data: bytes | str, limits: Limits, fast: bool = False) -> Any:
    """Parse one YAML document within `limits`; raise DocumentError naming the problem and line."""
    text = decode(data, limits)
    try:
        node = _Composer(limits).compose(yaml.parse(text, Loader=_CParser if fast else yaml.SafeLoader))
        if node is None:
            return None
        loader = yaml.SafeLoader("")
        return loader.construct_document(node)
    except DocumentError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise DocumentError(f"YAML syntax error: {exc.problem or exc.context}", _line(mark)) from None
    except yaml.YAMLError as exc:
        raise DocumentError(f"YAML syntax error: {exc}") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a constructor refusing a value
        raise DocumentError(f"a value YAML cannot construct: {type(exc).__name__}") from None


def _json_shape(text: str, limits: Limits) -> None:
    """Refuse nesting deeper than the limit, or more values than the limit, before json (which
    recurses, and builds every list) sees the text.

    Each object or array is one value, and so is each member of an object and each item of an array
    (a comma ends one; the last of a non-empty container ends at its bracket), so a 480,000-item
    list is refused as a 480,000-key object is.
    """
    depth, values, in_string, escaped, line, last = 0, 0, False, False, 1, ""
    for ch in text:
        if ch == "\n":
            line += 1
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            values += 1
            if depth > limits.max_depth:
                raise DocumentError(f"nested deeper than {limits.max_depth} levels", line)
        elif ch in "]}":
            depth -= 1
            values += last not in "[{"  # the last item of a non-empty container
        elif ch == ",":
            values += 1
        elif ch in " \t\r\n":
            continue
        if values > limits.max_nodes:
            raise DocumentError(f"more than {limits.max_nodes:,} values", line)
        last = ch


def load_json(data: bytes | str, limits: Limits) -> Any:
    """Parse a JSON document within `limits`: no duplicate keys, NaN or huge numbers."""
    text = decode(data, limits)
    _json_shape(text, limits)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                raise DocumentError(f"duplicate key {k[:80]!r}")
            out[k] = v
        return out

    def big_int(s: str) -> int:
        if len(s.lstrip("-")) > _MAX_INT_DIGITS:
            raise DocumentError(f"a number of more than {_MAX_INT_DIGITS} digits")
        return int(s)

    def constant(s: str) -> Any:
        raise DocumentError(f"{s} is not a number drctl accepts")

    try:
        doc = json.loads(text, object_pairs_hook=pairs, parse_int=big_int, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"JSON syntax error at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise DocumentError(f"nested deeper than {limits.max_depth} levels") from None
    # Only a \\uD800-\\uDFFF escape can make one (the text itself is UTF-8): walk only then.
    where = _unencodable(doc) if _SURROGATE_ESCAPE.search(text) else None
    if where is not None:
        raise DocumentError(f"{_NOT_UTF8} at {where}")
    return doc
