"""Hostile text for the sinks: what a server's reply, a Kubernetes message, an S3 key or a config value
may hold, and the check that what reached a terminal, a log, a webhook or the Temporal UI is safe.

Each case is one class of attack; `COMBINED` holds them all in one string, as a reason quoting a
server's answer could.
"""

from __future__ import annotations

import json
from typing import Any

LONG = "A" * 100_000  # a 100 kB line

CASES: dict[str, str] = {
    "ANSI clear screen": "probe failed \x1b[2J\x1b[Hall regions healthy",
    "OSC 8 hyperlink": "see \x1b]8;;http://evil.example/\x1b\\the runbook\x1b]8;;\x1b\\",
    "bidi override": "region us-east-1\u202e1-tsew-su",
    "NUL": "reason\x00hidden",
    "forged second line": "refused\nINFO drill verdict: PASSED",
    "100 kB line": LONG,
    "markdown link": "[open the runbook](http://evil.example/)",
    "html and entity": "<img src=x onerror=alert(1)> &#x202e;",
    "slack link and mentions": "@channel <!channel> <!here> <http://evil.example/|the runbook> <@U0123>",
    "table cell break": "x | forged | cells |",
    "heading": "# FAILOVER SUCCEEDED",
}
COMBINED = " ".join(v for k, v in CASES.items() if k != "100 kB line") + " " + LONG

# Characters that must never reach a sink raw: ESC, C1 CSI, NUL, bidi override, newline, BEL.
RAW_CONTROLS = ("\x1b", "\x9b", "\x00", "\u202e", "\n", "\r", "\x07")


def assert_shown_safely(text: str, limit: int, where: str) -> None:
    """`text` (what reached a sink) holds no raw control, bidi or newline, and is at most `limit` long."""
    found = [repr(c) for c in RAW_CONTROLS if c in text]
    assert not found, f"{where}: raw {', '.join(found)} in {text[:300]!r}"
    assert len(text) <= limit, f"{where}: {len(text)} characters, over {limit}"


def strings(doc: Any) -> list[str]:
    """Every string in a decoded JSON document, keys too."""
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in (*strings(k), *strings(v))]
    if isinstance(doc, list):
        return [s for v in doc for s in strings(v)]
    return []


def json_line(line: str) -> dict[str, Any]:
    doc = json.loads(line)
    assert isinstance(doc, dict)
    return doc
