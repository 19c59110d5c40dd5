"""One duration syntax, one parser (durationpy): every duration option reads 90, 90s, 5m, 1h30m."""

from __future__ import annotations

from datetime import timedelta

import pytest

from drctl.cli.common import UserError
from drctl.cli.durations import go_duration, parse_duration, seconds


@pytest.mark.parametrize(
    ("text", "secs"),
    [
        ("90", 90),
        ("90s", 90),
        ("5m", 300),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("720h", 2_592_000),
        ("2.5", 2.5),
        ("500ms", 0.5),
    ],
)
def test_every_form_is_read(text: str, secs: float) -> None:
    assert parse_duration(text, "--timeout").total_seconds() == secs


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("soon", "--ttl 'soon': not a duration (e.g. 90, 90s, 5m or 1h30m)"),
        ("3 days", "--ttl '3 days': not a duration"),
        ("5x", "--ttl '5x': not a duration"),
        ("", "--ttl '': not a duration"),
        ("-5m", "--ttl '-5m': must be more than 0"),
        ("0", "--ttl '0': must be more than 0"),
        ("nan", "--ttl 'nan': not a duration"),
        ("1e400", "--ttl '1e400': not a duration"),
    ],
)
def test_anything_else_is_refused_naming_the_option(text: str, words: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_duration(text, "--ttl")
    assert str(caught.value).startswith(words) and caught.value.exit_code == 2


def test_zero_where_it_means_something_and_the_go_form_velero_reads() -> None:
    assert parse_duration("0s", "--x", allow_zero=True) == timedelta(0)
    assert [go_duration(timedelta(seconds=s)) for s in (2_592_000, 5400, 90, 3600)] == [
        "720h",
        "1h30m",
        "1m30s",
        "1h",
    ]
    assert seconds("--timeout")("1h30m") == 5400 and seconds("--timeout")(30.0) == 30.0
