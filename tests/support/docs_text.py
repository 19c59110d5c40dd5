"""Reading README.md and docs/*.md: the pages, their fenced blocks, sections, links and headings.

The tests that keep the docs honest (commands run, links resolve, tables match the code) read the
pages through here, so they all agree on what a page, a block and a heading anchor are.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def pages() -> list[Path]:
    """README.md, then every docs/*.md in name order."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def page(name: str) -> str:
    """The text of one page, by its path from the repository root (`docs/configuration.md`)."""
    return (ROOT / name).read_text()


def name_of(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def blocks(text: str, lang: str) -> list[str]:
    """The bodies of the fenced blocks of that language (`sh`, `yaml`); `""` is a bare fence."""
    return [
        body
        for fence_lang, body in re.findall(r"^[ \t]*```(\w*)\n(.*?)^[ \t]*```", text, re.S | re.M)
        if fence_lang == lang
    ]


def unfenced(text: str) -> str:
    """The text without its fenced blocks: prose and its inline code spans."""
    return re.sub(r"^[ \t]*```.*?^[ \t]*```", "", text, flags=re.S | re.M)


def spans(text: str) -> list[str]:
    """The inline code spans of the prose, whitespace collapsed (a span may wrap a line)."""
    return [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", unfenced(text))]


def without_code(text: str) -> str:
    """The text with fenced blocks and inline code spans blanked: what is prose, links included."""
    return re.sub(r"`[^`]*`", "", unfenced(text))


def section(text: str, heading: str) -> str:
    """From the heading (a line such as `## Kill points`) to the next heading of its level or higher."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(f"{heading}\n")
    rest = text[start + len(heading) :]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{level}}} ", rest, re.M)]
    return text[start : start + len(heading) + (ends[0] if ends else len(rest))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a page, with GitHub's -1, -2 suffixes for repeated headings."""
    seen: dict[str, int] = {}
    out = set()
    for line in unfenced(text).splitlines():
        m = re.match(r"^#{1,6} (.+?)\s*#*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(text: str) -> list[str]:
    """The targets of every markdown link and image in the prose, in order."""
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", without_code(text))


def dead_links(path: Path) -> list[str]:
    """The relative links of a page that name no file, or a heading its target page lacks."""
    dead = []
    for target in links(path.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: ...: not a file here
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            dead.append(f"{target}: no file {dest}")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest.read_text())):
            dead.append(f"{target}: no heading #{anchor} in {dest.name}")
    return dead
