"""bench/args.py: a range is checked as it is printed, ends included or not as the brackets say."""

from __future__ import annotations

import pytest

from bench.args import BenchParser, Bounds


@pytest.mark.parametrize(
    ("within", "inside", "outside"),
    [
        ("1..200", [1, 200], [0, 201]),
        ("(0, 60]", [0.001, 60], [0, 60.001]),
        ("(0, 1]", [0.001, 0.7, 1], [0, 1.001, -0.7]),  # a share, as bench/partial.py --load-fraction
        ("[0, 1)", [0, 0.999], [-0.001, 1]),
        (">= 1", [1, 1e9], [0.999]),
    ],
)
def test_each_end_is_in_or_out_as_written(within: str, inside: list[float], outside: list[float]) -> None:
    bounds = Bounds.parse(within)
    assert [bounds.holds(v) for v in inside] == [True] * len(inside)
    assert [bounds.holds(v) for v in outside] == [False] * len(outside)


def test_a_value_outside_is_refused_naming_the_flag_the_range_and_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    p = BenchParser(prog="bench")
    p.number("--rps", 10.0, "User load", "(0, 100]", why="bounded")
    assert p.parse_args([]).rps == 10.0 and "User load (default 10)" in p.format_help()
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--rps", "0"])
    assert exc.value.code == 2 and "--rps must be in (0, 100]: bounded" in capsys.readouterr().err


def test_a_range_written_otherwise_is_a_bench_bug_caught_at_declaration() -> None:
    with pytest.raises(ValueError, match="range '0-100'"):
        Bounds.parse("0-100")
