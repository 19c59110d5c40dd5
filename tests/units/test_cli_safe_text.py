"""The one escaper: no control, C1 or bidi character and no rich markup from a file reaches a terminal raw."""

from __future__ import annotations

import io

import pytest

from drctl.cli.common import SafeConsole, shown
from drctl.models.safe_text import safe_text

HOSTILE = {
    "ESC colour": ("a\x1b[31mred", "a\\x1b[31mred"),
    "C1 CSI clears the screen": ("x\x9b2J", "x\\x9b2J"),
    "OSC 52 writes the clipboard": ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),
    "bidi override": ("abc\u202eevil", "abc\\u202eevil"),
    "bidi isolate": ("\u2066x\u2069", "\\u2066x\\u2069"),
    "forged second line": ("ok\nerror: the experiment is valid", "ok\\nerror: the experiment is valid"),
    "carriage return overwrites the line": ("bad\rgood", "bad\\rgood"),
    "line separator": ("a\u2028b", "a\\u2028b"),
    "DEL": ("a\x7f", "a\\x7f"),
}


@pytest.mark.parametrize(("raw", "escaped"), HOSTILE.values(), ids=list(HOSTILE))
def test_every_control_c1_and_bidi_character_is_a_visible_escape(raw: str, escaped: str) -> None:
    assert safe_text(raw) == escaped
    assert safe_text(raw).isprintable()


def test_ordinary_text_and_other_scripts_are_unchanged() -> None:
    for text in ("us-east-1", "http://h:1/a[/]b", "é ü 中文 → ±", ""):
        assert safe_text(text) == text
    assert safe_text("a\nb", keep_newlines=True) == "a\nb"  # the renderer's own lines only


def _printed(*objects: object, markup: bool = True) -> str:
    out = io.StringIO()
    console = SafeConsole()
    console.file = out
    console.print(*objects, markup=markup)
    return out.getvalue()


def test_the_console_escapes_what_a_renderer_forgot_and_survives_markup() -> None:
    from rich.table import Table
    from rich.text import Text

    assert "\x1b]52" not in _printed("title \x1b]52;c;ZXZpbA==\x07")
    assert "\\x1b]52" in _printed(Text("title \x1b]52;c;ZXZpbA==\x07", style="bold"))
    # `[/]` closes nothing: rich raises MarkupError; the console shows it as written instead.
    assert "http://h/a[/]b" in _printed("http://h/a[/]b")
    t = Table()
    t.add_column("gateway")
    t.add_row("http://h/a[/]b\u202e")
    assert "http://h/a[/]b\\u202e" in _printed(t)


def test_shown_values_keep_their_brackets_and_cannot_restyle_the_line() -> None:
    assert _printed(f"[bold]gateway[/bold] {shown('[red]http://h/[/]x')}").strip() == (
        "gateway [red]http://h/[/]x"
    )
