"""The benches' command lines: a bounded number option is declared once, with its range.

A bench used to write each range twice, once in the check and once in its error message, and to
repeat "(default N)" by hand in every help text. `BenchParser.number` takes the range as it is
printed, in one of the forms `1..200`, `[10, 3600]`, `(0, 60]`, `[0, 1)`, `(0, 1)` or `>= 1`, checks
parsed values against it, and refuses one outside it as argparse refuses any bad argument: exit 2,
with `--flag must be in (0, 60]` (and why, when the bench says) on stderr.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# The why of the load limits: every bench shares the machine with the others, and with the tests.
BOUNDED_LOAD = "the load must stay bounded on a shared machine"

_INTERVAL = re.compile(r"^([\[(])\s*(\S+),\s*(\S+)\s*([\])])$")
_DOTS = re.compile(r"^(\S+)\.\.(\S+)$")
_AT_LEAST = re.compile(r"^>=\s*(\S+)$")


@dataclass(frozen=True)
class Bounds:
    """A range as a bench prints it: low and high (None: unbounded), and whether each end is in."""

    text: str
    low: float | None
    high: float | None
    low_in: bool = True
    high_in: bool = True

    @classmethod
    def parse(cls, text: str) -> Bounds:
        if m := _INTERVAL.match(text):
            return cls(text, float(m[2]), float(m[3]), m[1] == "[", m[4] == "]")
        if m := _DOTS.match(text):
            return cls(text, float(m[1]), float(m[2]))
        if m := _AT_LEAST.match(text):
            return cls(text, float(m[1]), None)
        raise ValueError(f"range {text!r}: expected 1..200, [a, b], (a, b], [a, b), (a, b) or >= a")

    def holds(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (value == self.low and not self.low_in)):
            return False
        return self.high is None or value < self.high or (value == self.high and self.high_in)

    def refusal(self, flag: str) -> str:
        return (
            f"{flag} must be {self.text}" if self.text.startswith(">=") else f"{flag} must be in {self.text}"
        )


class BenchParser(argparse.ArgumentParser):
    """An ArgumentParser whose `number` options are range-checked when the arguments are parsed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._bounded: list[tuple[str, str, Bounds, str]] = []

    def number(self, flag: str, default: float, help: str, within: str, why: str = "") -> None:
        """`flag` of the type of `default`; its help says the default, a value outside `within` is refused."""
        bounds = Bounds.parse(within)
        dest = flag.removeprefix("--").replace("-", "_")
        self.add_argument(flag, type=type(default), default=default, help=f"{help} (default {default:g})")
        self._bounded.append((flag, dest, bounds, why))

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: None = None
    ) -> argparse.Namespace:
        parsed = super().parse_args(args, namespace)
        for flag, dest, bounds, why in self._bounded:
            if not bounds.holds(getattr(parsed, dest)):
                self.error(bounds.refusal(flag) + (f": {why}" if why else ""))
        return parsed
