"""Typed experiment arguments: what a drctl action or probe is given, judged by its Python signature.

chaoslib calls `func(**arguments)` with whatever the document holds, so without this a `count` of
"2" or 1.5, a bool where a number is meant, or a 73-digit integer reaches the fault code and fails
(or does something else) only at run time. Here every argument must be a parameter of the function,
of the type its annotation names (bool is not a number), within the range its name means across
drctl's chaos functions, and every required parameter must be there.

HTTP headers follow RFC 9110: a name is a token (section 5.1), a value holds no CR, LF, NUL or other
control character but HTAB (section 5.5), and no header that picks the virtual host or controls the
connection (Host, Connection, Transfer-Encoding, ...) may be set: the checked URL says where a probe
goes, and only the HTTP client frames the request.
"""

from __future__ import annotations

import inspect
import math
import re
import typing
from collections.abc import Callable
from typing import Any

# RFC 9110 section 5.6.2: token = 1*tchar.
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}")
# RFC 9110 section 5.5: a field value is VCHAR, obs-text, SP and HTAB; CR, LF and NUL never.
_BAD_VALUE_CHAR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
MAX_HEADERS = 32
MAX_HEADER_VALUE = 4096
# Headers an experiment may not set: they pick another virtual host or origin, or frame or control
# the connection (RFC 9110 section 7.6.1 hop-by-hop fields, and the proxies' forwarding headers).
NOT_SETTABLE = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "expect",
        "forwarded",
        "x-forwarded-host",
        "x-forwarded-for",
        "x-forwarded-proto",
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
    }
)
MAX_REQUESTS = 500  # probes._MAX_REQUESTS: a probe of more requests is refused, not clamped
MAX_TIMEOUT_S = 60.0
# Numeric ranges by argument name: one name means one thing in every drctl chaos function.
# (low, high, low included); `within_s` is bounded by the drill's own timeout (see ranges()).
_RANGES: dict[str, tuple[float, float, bool]] = {
    "requests": (1, MAX_REQUESTS, True),
    "consecutive": (1, 1000, True),
    "count": (1, 1000, True),
    "max_retries": (0, 3, True),
    "timeout_s": (0, MAX_TIMEOUT_S, False),
    "timeout": (0, MAX_TIMEOUT_S, False),
    "added_latency_ms": (0, 60_000, True),
    "error_rate": (0, 1, True),
}
_MAX_TEXT = 200  # a region, track, header name, model or method: far below the 16 KiB document limit
_MAX_URL = 2048


class ArgumentRefused(ValueError):
    """An argument the function would not accept as meant. The message names the field path."""


def ranges(drill_timeout_s: float) -> dict[str, tuple[float, float, bool]]:
    """The numeric ranges, with `within_s` bounded by the drill's timeout."""
    return {**_RANGES, "within_s": (0, drill_timeout_s, False)}


def _number(where: str, value: Any, integer: bool) -> None:
    if type(value) is bool or not isinstance(value, int | float):
        kind = "an integer" if integer else "a number"
        raise ArgumentRefused(f"{where}: must be {kind}, not {type(value).__name__} {str(value)[:40]!r}")
    if integer and type(value) is not int:
        raise ArgumentRefused(f"{where}: must be an integer, not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ArgumentRefused(f"{where}: must be a finite number, not {value!r}")


def _in_range(where: str, name: str, value: float, table: dict[str, tuple[float, float, bool]]) -> None:
    if name not in table:
        return
    low, high, low_in = table[name]
    if value > high or value < low or (value == low and not low_in):
        opening = "[" if low_in else "("
        shown = str(value) if len(str(value)) <= 24 else f"{str(value)[:20]}... ({len(str(value))} digits)"
        raise ArgumentRefused(f"{where}: {shown} is outside {opening}{low:g}, {high:g}]")


def check_headers(where: str, headers: Any) -> dict[str, str]:
    """Headers an experiment sets: a mapping of RFC 9110 names to values, none of them NOT_SETTABLE."""
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise ArgumentRefused(f"{where}: headers must be a mapping of name to value")
    if len(headers) > MAX_HEADERS:
        raise ArgumentRefused(f"{where}: at most {MAX_HEADERS} headers, not {len(headers)}")
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            raise ArgumentRefused(
                f"{where}: header name {str(name)[:40]!r} is not an RFC 9110 token "
                "(letters, digits and !#$%&'*+-.^_`|~ only)"
            )
        if name.lower() in NOT_SETTABLE:
            raise ArgumentRefused(
                f"{where}.{name}: this header may not be set by an experiment (it picks the host or "
                "controls the connection; the checked URL says where the probe goes)"
            )
        if not isinstance(value, str):
            raise ArgumentRefused(f"{where}.{name}: a header value must be text, not {type(value).__name__}")
        if len(value) > MAX_HEADER_VALUE or _BAD_VALUE_CHAR.search(value):
            raise ArgumentRefused(
                f"{where}.{name}: a header value may not hold CR, LF, NUL or other control characters "
                f"and is at most {MAX_HEADER_VALUE} characters"
            )
    return headers


def _scalar_params(where: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise ArgumentRefused(f"{where}: query parameters must be a mapping of name to value")
    for key, item in value.items():
        if not isinstance(key, str) or len(key) > _MAX_TEXT:
            raise ArgumentRefused(f"{where}: a query parameter name must be short text")
        if isinstance(item, float) and not math.isfinite(item):
            raise ArgumentRefused(f"{where}.{key}: must be a finite number")
        if not isinstance(item, str | int | float | bool):
            raise ArgumentRefused(f"{where}.{key}: a query parameter value must be text or a number")


def _check_one(
    where: str, name: str, hint: Any, value: Any, table: dict[str, tuple[float, float, bool]]
) -> None:
    optional = type(None) in typing.get_args(hint)
    if value is None and optional:
        return
    base = next((a for a in typing.get_args(hint) if a is not type(None)), hint) if optional else hint
    if name == "headers":
        check_headers(where, value)
    elif base is Any:
        _scalar_params(where, value)
    elif base is int or base is float:
        _number(where, value, integer=base is int)
        _in_range(where, name, value, table)
    elif base is str:
        if not isinstance(value, str):
            raise ArgumentRefused(f"{where}: must be text, not {type(value).__name__} {str(value)[:40]!r}")
        longest = _MAX_URL if name == "url" else _MAX_TEXT
        if len(value) > longest:
            raise ArgumentRefused(f"{where}: at most {longest} characters, not {len(value)}")
        if name == "header" and not HEADER_NAME.fullmatch(value):
            raise ArgumentRefused(f"{where}: {value[:40]!r} is not an RFC 9110 header name")
    else:  # an annotation this table does not know: refuse rather than pass it unchecked
        raise ArgumentRefused(f"{where}: drctl cannot check an argument of type {hint!r}")


def check_arguments(
    where: str, func: Callable[..., Any], args: dict[str, Any], drill_timeout_s: float
) -> dict[str, Any]:
    """`args` checked against `func`'s signature; the full call (defaults filled in) it makes."""
    sig = inspect.signature(func)
    hints = typing.get_type_hints(func)
    params = {n: p for n, p in sig.parameters.items() if n != "configuration"}
    table = ranges(drill_timeout_s)
    for name in args:
        if name not in params:
            raise ArgumentRefused(
                f"{where}.{str(name)[:40]}: not an argument of {func.__name__} "
                f"(it takes {', '.join(params) or 'none'})"
            )
    call: dict[str, Any] = {}
    for name, param in params.items():
        if name in args:
            _check_one(f"{where}.{name}", name, hints.get(name, Any), args[name], table)
            call[name] = args[name]
        elif param.default is inspect.Parameter.empty:
            raise ArgumentRefused(f"{where}: {func.__name__} needs argument {name!r}")
        else:
            call[name] = param.default
    return call
