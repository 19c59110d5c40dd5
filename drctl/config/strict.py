"""The base of every fleet-config model: strict scalars, bounded numbers, names as their owners read them.

Rules that hold for every field, so that a new field gets them without anyone remembering:
- a number field takes a number (never a bool or a string), a bool field takes a bool;
- every number is finite and within +-1e9 (a 5,000-digit integer never reaches `timedelta`);
- a duration in seconds (`*_s`) is 0..24 h, and an interval (`*interval*_s`) 0..1 h, so no value
  can make a workflow task fail while it builds a `timedelta` or a timer; a few ages may be longer.
Names and URLs are checked where they are declared, with the validators below.
"""

from __future__ import annotations

import math
import re
import types
import typing
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from drctl.config.urls import UrlRefused, check_host, check_host_port, check_http_url

_NUMBER_LIMIT = 1e9
_DAY_S = 86_400.0
_HOUR_S = 3_600.0
# Durations that are legitimately longer than a day: a backup's age alert follows its schedule; a
# drill's failback deadline is derived from the failback settings (at most about 44 h).
_LONGER_S = {"max_age_s": 30 * _DAY_S, "failback_timeout_s": 2 * _DAY_S}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
# Temporal accepts more (any UTF-8 up to 1,000 bytes, not /_sys/...); drctl's names also appear in
# workflow ids, metrics labels and shell lines, so they stay printable and short.
TASK_QUEUE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$")
TEMPORAL_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,254}$")
# POSIX's portable environment variable names (uppercase, digits, underscore), bounded.
ENV_VAR_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
# Names that reach logs, shells and API calls (kube contexts, set identifiers, model names, images):
# printable ASCII without spaces, quotes, markup brackets or shell metacharacters.
TOKEN_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:/@+=-]{0,252}$")
AWS_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$")
# Free text a person reads (an identity): any printable character, no controls, C1 or bidi overrides.
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def _scalar_kinds(annotation: Any) -> set[type]:
    """The scalar types a field annotation admits (int, float, bool), through Optional and lists."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_scalar_kinds(a) for a in typing.get_args(annotation)))
    if annotation in (int, float, bool):
        return {annotation}
    return set()


def _list_of(annotation: Any) -> set[type]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_list_of(a) for a in typing.get_args(annotation)))
    if origin is list:
        return _scalar_kinds(typing.get_args(annotation)[0])
    return set()


def _check_scalar(name: str, kinds: set[type], v: Any) -> None:
    if v is None:
        return
    if bool in kinds and not kinds - {bool}:
        if type(v) is not bool:
            raise ValueError(f"expected true or false, not {type(v).__name__}")
        return
    wanted = "a number" if float in kinds else "an integer"
    if type(v) is bool or not isinstance(v, int | float) or (float not in kinds and not isinstance(v, int)):
        raise ValueError(f"expected {wanted}, not {type(v).__name__}")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError("expected a finite number")
    if abs(v) > _NUMBER_LIMIT:
        raise ValueError(f"out of range: at most {_NUMBER_LIMIT:.0e} in size")
    if name.endswith("_s"):
        cap = _LONGER_S.get(name, _HOUR_S if "interval" in name else _DAY_S)
        if not 0 <= v <= cap:
            raise ValueError(f"a duration must be 0..{cap:g} seconds")


class ScalarProblems(ValueError):
    """Fields of one model whose scalars break the rules; the loader reports each at its own path."""

    def __init__(self, items: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{k}: {m}" for k, m in items))
        self.items = items


class BoundedScalars(BaseModel):
    """The scalar rules above, without the config's strictness about keys and mutation: for the
    workflow inputs built from the config (drctl/models), which Temporal clients can also send."""

    @model_validator(mode="before")
    @classmethod
    def _strict_scalars(cls, data: Any) -> Any:
        # A model validator, not a per-field one: pydantic forbids "before" validators on the
        # discriminator fields of tagged unions, and this must cover every field of every model.
        if not isinstance(data, dict):
            return data
        problems = []
        for key, name, kinds, item_kinds in _scalar_fields(cls):
            if key not in data:
                continue
            v = data[key]
            try:
                if kinds:
                    _check_scalar(name, kinds, v)
                if item_kinds and isinstance(v, list):
                    for item in v:
                        _check_scalar("", item_kinds, item)
            except ValueError as exc:
                problems.append((key, str(exc)))
        if problems:
            raise ScalarProblems(problems)
        return data


class StrictModel(BoundedScalars):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    def _exactly_one(self, *names: str) -> Self:
        """For an "after" validator: one setting that may be given several ways, given one way."""
        if sum(bool(getattr(self, n)) for n in names) != 1:
            raise ValueError(f"set exactly one of {' or '.join(names)}")
        return self


_FIELDS: dict[type, list[tuple[str, str, set[type], set[type]]]] = {}


def _scalar_fields(cls: type[BaseModel]) -> list[tuple[str, str, set[type], set[type]]]:
    """(input key, field name, scalar kinds, list item kinds) of the fields that hold numbers or bools."""
    if cls not in _FIELDS:
        rows = []
        for name, field in cls.model_fields.items():
            kinds, items = _scalar_kinds(field.annotation), _list_of(field.annotation)
            if kinds or items:
                rows += [(key, name, kinds, items) for key in {name, field.alias or name}]
        _FIELDS[cls] = rows
    return _FIELDS[cls]


def http_url(v: str | None) -> str | None:
    """A field validator body for an HTTP endpoint: http(s) only, one reading, no credentials."""
    if v is None:
        return None
    try:
        check_http_url(v)
    except UrlRefused as exc:
        raise ValueError(str(exc)) from None
    # Kept as written: the re-serialised form may differ only in case and default ports.
    return v


def host_port(v: str) -> str:
    """A field validator body for a gRPC address (temporal.address): host:port only."""
    try:
        return check_host_port(v)
    except UrlRefused as exc:
        raise ValueError(str(exc)) from None


def host_name(v: str | None) -> str | None:
    """A field validator body for a bare host: a DNS name (ASCII or punycode) or an IP literal."""
    if v is None:
        return None
    try:
        return check_host(v)
    except UrlRefused as exc:
        raise ValueError(str(exc)) from None


def printable(v: str | None) -> str | None:
    if v is not None and _UNPRINTABLE.search(v):
        raise ValueError("control, zero-width or bidi characters are not allowed")
    return v


def matches(pattern: re.Pattern[str], what: str, v: str | None) -> str | None:
    if v is not None and not pattern.fullmatch(v):
        raise ValueError(f"not a valid {what}: {v[:80]!r}")
    return v


def _named(pattern: re.Pattern[str], what: str) -> AfterValidator:
    return AfterValidator(lambda v: matches(pattern, what, v))


# Field types: the rule travels with the type, so a new field of the kind cannot forget it.
HttpUrl = Annotated[str, AfterValidator(http_url)]
HostPort = Annotated[str, AfterValidator(host_port)]
KubeNamespace = Annotated[str, _named(DNS_LABEL, "Kubernetes namespace (DNS-1123 label)")]
KubeObjectName = Annotated[str, _named(DNS_SUBDOMAIN, "Kubernetes object name (DNS-1123 subdomain)")]
TaskQueue = Annotated[str, _named(TASK_QUEUE_RE, "Temporal task queue name")]
TemporalNamespace = Annotated[str, _named(TEMPORAL_NAMESPACE_RE, "Temporal namespace name")]
EnvVarName = Annotated[str, _named(ENV_VAR_RE, "environment variable name (A-Z, 0-9, _; not a digit first)")]
HostName = Annotated[str, AfterValidator(host_name)]
Token = Annotated[str, _named(TOKEN_RE, "name (letters, digits and . _ : / @ + = -)")]
AwsRegion = Annotated[str, _named(AWS_REGION_RE, "AWS region name (e.g. us-east-1)")]
PrintableText = Annotated[str, AfterValidator(printable)]
