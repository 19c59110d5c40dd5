"""One duration syntax for every option that takes one: `90`, `90s`, `5m`, `1h30m`, `1.5h`, `720h`.

`--timeout`, `--interval`, `--ttl`, `--every`, `--jitter`: each is parsed here, by durationpy (Go's
`time.ParseDuration` grammar, as Velero, kubectl and the Temporal CLI read durations), plus a bare
number meaning seconds, as drctl's options always took. A value that is not a duration, negative,
or zero where zero means nothing is a usage error naming the option, in one line (exit 2): a
UserError, raised through click's parsing to the one error renderer.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

EXAMPLES = "e.g. 90, 90s, 5m or 1h30m"


def parse_duration(text: str, option: str = "duration", *, allow_zero: bool = False) -> timedelta:
    """`text` as a timedelta: a Go duration (`1h30m`, `90s`, `500ms`) or a bare number of seconds."""
    import durationpy  # small, but only a command that takes a duration pays for it

    from drctl.cli.common import UserError

    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            delta = durationpy.from_str(value)
        except (durationpy.DurationError, ValueError, OverflowError):
            raise UserError(f"{option} {text!r}: not a duration ({EXAMPLES})") from None
    else:
        if not math.isfinite(seconds) or abs(seconds) > timedelta.max.total_seconds():
            raise UserError(f"{option} {text!r}: not a duration ({EXAMPLES})")
        delta = timedelta(seconds=seconds)
    if delta < timedelta(0) or (delta == timedelta(0) and not allow_zero):
        raise UserError(f"{option} {text!r}: must be {'' if allow_zero else 'more than '}0")
    return delta


def go_duration(delta: timedelta) -> str:
    """`delta` in whole seconds as Velero and Kubernetes read it: `720h`, `1h30m`, `1m30s`."""
    import durationpy

    text: str = durationpy.to_str(timedelta(seconds=round(delta.total_seconds())))
    return text


def seconds(option: str, *, allow_zero: bool = False) -> Any:
    """A Typer `parser` for an option in seconds (float): `typer.Option("--timeout", parser=seconds("--timeout"))`."""

    def parse(text: Any) -> float:
        if isinstance(text, int | float):  # a default, already a number
            return float(text)
        return parse_duration(str(text), option, allow_zero=allow_zero).total_seconds()

    return parse


def delta(option: str) -> Any:
    """A Typer `parser` for an option kept as a timedelta (`--jitter`, `--ttl`)."""

    def parse(text: Any) -> timedelta:
        return text if isinstance(text, timedelta) else parse_duration(str(text), option)

    return parse
