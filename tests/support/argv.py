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


def refusal_test(
    parse: Callable[[list[str]], object], cases: list[tuple[list[str], str]]
) -> Callable[[list[str], str, pytest.CaptureFixture[str]], None]:
    """A test, parametrized over `cases` of (arguments, what the message says), that each is refused.

    Bind it to a `test_` name in the test module, e.g.
    `test_bad_arguments_exit_2_naming_the_problem = refusal_test(parse_args, BAD_ARGUMENTS)`.
    """

    @pytest.mark.parametrize(("argv", "says"), cases)
    def test(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
        assert_refused(parse, argv, says, capsys)

    return test
