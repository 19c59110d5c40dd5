"""At an 80-column terminal a table folds its long values onto more lines: none is cut to `…`."""

from __future__ import annotations

import io
from collections import Counter

from rich.console import Group
from rich.table import Table

from drctl.cli.common import SafeConsole
from drctl.cli.data_status import renderables

IMAGE = "registry.example.com/inference/vllm-openai:v0.33.0@sha256:" + "0123456789abcdef" * 4
MODEL = "meta-llama/Llama-3.1-70B-Instruct-FP8-dynamic"


def _at_80(*objects: object) -> str:
    out = io.StringIO()
    console = SafeConsole()
    console.file, console.width = out, 80
    console.print(*objects)
    return out.getvalue()


def _releases() -> dict[str, object]:
    row = {"image": IMAGE, "model": MODEL, "served_models": [MODEL], "env_names": ["A", "B"]}
    return {
        "releases": [
            {"region": "us-west-1", "primary": True, **row},
            {"region": "us-east-1", "parity": {"drift": []}, **row},
        ]
    }


def _chars(text: str) -> Counter[str]:
    return Counter(c for c in text if c.isalnum())


def test_the_release_parity_table_shows_every_value_whole_at_80_columns() -> None:
    shown = _at_80(*renderables(_releases()))
    assert "…" not in shown
    assert max(len(line) for line in shown.splitlines()) <= 80
    # Every character of every value is on the screen (folded lines, but nothing dropped).
    values = "".join(["us-west-1", "us-east-1", IMAGE * 2, MODEL * 4])
    assert not _chars(values) - _chars(shown)


def test_any_table_the_cli_prints_folds_even_inside_a_group() -> None:
    t = Table(title="t")
    t.add_column("a")
    t.add_column("b")
    t.add_row(IMAGE, MODEL)
    shown = _at_80(Group(t))
    assert "…" not in shown
    assert not _chars(IMAGE + MODEL) - _chars(shown)
