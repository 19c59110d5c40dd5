"""Command-line refusals: a bad argument exits 2 with a message naming it, and no traceback."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def assert_refused(
    parse: Callable[[list[str]], object], argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`parse(argv)` exits 2, and what it writes to stderr contains `says`."""
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    assert says in capsys.readouterr().err
