"""Text that came from a file or a config, made safe to show: the one escaper every renderer shares.

An experiment title, a config value or a `kube.context` is written by whoever wrote the file, and a
reviewer reads it on a terminal, in a log line or in a notification. Shown raw, ESC and C1 CSI
sequences repaint the screen, OSC 52 rewrites the reader's clipboard, bidi overrides make a line
read in another order than it runs, and an embedded newline forges a second line ("the experiment
is valid"). `safe_text` writes each such character as a visible escape (`\\x1b`, `\\u202e`, `\\n`),
so the reader sees what the file holds and nothing else. Rich markup is the CLI's own concern
(drctl/cli/common.py escapes it on top of this).
"""

from __future__ import annotations

import unicodedata

# Bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069), and the marks that steer
# reordering without being seen (LRM, RLM, ALM).
_BIDI = frozenset(
    [*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), "\u200e", "\u200f", "\u061c"]
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def _unsafe(c: str, keep: str) -> bool:
    if c in keep:
        return False
    # Cc: C0 and C1 controls and DEL; Cf: format characters (bidi, zero-width); Zl/Zp: line and
    # paragraph separators, which some terminals and log viewers break lines on.
    return c in _BIDI or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")


def safe_text(value: object, *, keep_newlines: bool = False) -> str:
    """`value` as a string whose control, C1, bidi and format characters are visible escapes.

    One line unless `keep_newlines`: a newline is `\\n`, so text from a file can never start a line of
    its own. `keep_newlines` is for the renderer's own multi-line output, never for a refusal.
    """
    text = str(value)
    keep = "\n" if keep_newlines else ""
    if text.isprintable() and "\u2028" not in text:  # the common case, no character to look at
        return text
    return "".join(_escape(c) if _unsafe(c, keep) else c for c in text)
