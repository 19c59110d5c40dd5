"""Text that came from a file or a config, made safe to show: the one escaper every renderer shares.

An experiment title, a config value or a `kube.context` is written by whoever wrote the file, and a
reviewer reads it on a terminal, in a log line or in a notification. Shown raw, ESC and C1 CSI
sequences repaint the screen, OSC 52 rewrites the reader's clipboard, bidi overrides make a line
read in another order than it runs, and an embedded newline forges a second line ("the experiment
is valid"). `safe_text` writes each such character as a visible escape (`\\x1b`, `\\u202e`, `\\n`),
so the reader sees what the file holds and nothing else. Rich markup is the CLI's own concern
(drctl/cli/common.py escapes it on top of this).

The same text also reaches readers that interpret more than control bytes; each gets the one
escaper plus what its format needs, and a bound on length:
- `safe_markdown` for the Temporal UI's details (markdown): links, HTML, entities and table cells;
- `safe_slack` for Slack mrkdwn: `<...>` links and mentions, `&` entities, broadcast mentions.
Pure (the standard library only): workflow code calls it, and it must be deterministic.
"""

from __future__ import annotations

import re
import unicodedata

# Bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069), and the marks that steer
# reordering without being seen (LRM, RLM, ALM).
_BIDI = frozenset(
    [*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), "\u200e", "\u200f", "\u061c"]
)
# A Temporal UI summary (an activity's, a workflow's static one) is one line in a list: escaped and
# cut to this wherever one is written, by a workflow or by the CLI.
SUMMARY_CHARS = 300
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


def safe_text(value: object, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """`value` as a string whose control, C1, bidi and format characters are visible escapes.

    One line unless `keep_newlines`: a newline is `\\n`, so text from a file can never start a line of
    its own. `keep_newlines` is for the renderer's own multi-line output, never for a refusal.
    With `limit`, the result is at most that many characters: a longer text is cut and says how long
    it was, so a 100 kB reason cannot flood a log line, a chat message or the UI.
    """
    text = str(value)
    # Escaping only lengthens, so nothing past limit + 1 characters can reach the result.
    raw = text if limit is None else text[: limit + 1]
    keep = "\n" if keep_newlines else ""
    if raw.isprintable() and "\u2028" not in raw:  # the common case, no character to look at
        shown = raw
    else:
        shown = "".join(_escape(c) if _unsafe(c, keep) else c for c in raw)
    return shown if limit is None else _bounded(shown, limit, len(text))


def _bounded(shown: str, limit: int, original: int) -> str:
    if len(shown) <= limit:
        return shown
    tail = f"… (cut, {original} characters)"
    # Cutting may split an escape (`\\x1`, `\\[`, `&am`): what is left is still plain text.
    return shown[: max(limit - len(tail), 0)] + tail[:limit]


# Backslash-escaped in markdown: what links ([x](y), <url>), embeds HTML, decodes an entity into a
# hidden character (&#x202e;), or ends a table cell. Emphasis and code spans stay as written: they
# cannot link, hide text or forge a line, and the renderers' own text uses them.
_MARKDOWN = re.compile(r"([\\\[\]<>&|])")
# At the start of a value, what would make a heading, a quote, a list item or a rule.
_MARKDOWN_LEAD = re.compile(r"^( *)([#>+=*_-])|^( *\d{1,9})([.)])(?= |$)")


def _escape_lead(m: re.Match[str]) -> str:
    lead, mark = (m.group(1), m.group(2)) if m.group(2) else (m.group(3), m.group(4))
    return f"{lead}\\{mark}"


def safe_markdown(value: object, *, limit: int | None = None) -> str:
    """`safe_text`, for a markdown reader (the Temporal UI's details): one line, no link, no HTML."""
    text = _MARKDOWN.sub(r"\\\1", safe_text(value, limit=limit))
    text = _MARKDOWN_LEAD.sub(_escape_lead, text, count=1)
    return text if limit is None else _bounded(text, limit, len(str(value)))


# Slack pings a whole channel for these, in blocks unless verbatim and in some clients' fallback.
_BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)


def safe_slack(value: object, *, limit: int | None = None) -> str:
    """`safe_text`, for Slack mrkdwn: `&`, `<` and `>` as entities (Slack's own escaping), so no
    `<url|label>` link or `<!channel>` mention; `@channel`, `@here`, `@everyone` with a full-width ＠."""
    text = safe_text(value, limit=limit).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _BROADCAST.sub(lambda m: "\uff20" + m.group(1), text)
    return text if limit is None else _bounded(text, limit, len(str(value)))
