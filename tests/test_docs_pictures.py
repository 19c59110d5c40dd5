"""The docs' pictures: none older than what it shows, each named rightly, none orphaned.

docs/pictures/build.py draws the SVGs from the code and config/fleet.yaml, and the failover timeline
from bench/samples/failover.json; its --check draws the SVGs again and compares, and compares the
sha256 of the timeline's inputs with docs/pictures/manifest.json. A picture the docs show must exist,
with the alt text its own title gives (an SVG's <title>, a PNG's manifest "title"), and every
picture under docs/ must be shown by some page.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.docs_text import README, ROOT

BUILD = ROOT / "docs" / "pictures" / "build.py"
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+\.(?:svg|png))\)")


def _build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_pictures_build", BUILD)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shown() -> dict[Path, list[tuple[str, str]]]:
    """Each picture README.md and docs/*.md show -> [(page, alt text)]."""
    shown: dict[Path, list[tuple[str, str]]] = {}
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for alt, target in IMAGE.findall(page.read_text()):
            shown.setdefault((page.parent / target).resolve(), []).append((page.name, alt))
    return shown


def _title(picture: Path, manifest: dict[str, dict[str, object]]) -> str:
    if picture.suffix == ".svg":
        found = re.search(r"<title>([^<]*)</title>", picture.read_text())
        assert found, f"{picture} has no <title>"
        return found.group(1).replace("&#x27;", "'").replace("&amp;", "&")
    entry = manifest.get(picture.relative_to(ROOT / "docs").as_posix())
    assert entry, f"{picture} is no generated picture: docs/pictures/manifest.json does not list it"
    return str(entry["title"])


def test_no_picture_is_older_than_what_it_shows() -> None:
    proc = subprocess.run(
        [sys.executable, str(BUILD), "--check"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr


def test_a_changed_input_or_picture_is_found_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a hand-edited SVG, and a timeline whose recorded input hash differs."""
    build = _build()
    for name in build.DRAWN:
        (tmp_path / name).write_text((build.HERE / name).read_text())
    manifest = json.loads(build.MANIFEST.read_text())
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(build, "HERE", tmp_path)
    monkeypatch.setattr(build, "MANIFEST", tmp_path / "manifest.json")
    assert build.stale() == []
    (tmp_path / "region-states.svg").write_text(
        (tmp_path / "region-states.svg").read_text().replace("DOWN", "UP")
    )
    manifest["failover.png"]["inputs"]["bench/samples/failover.json"] = "0" * 64
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert build.stale() == ["region-states.svg", "failover.png"]


def test_every_picture_shown_exists_under_its_own_title() -> None:
    manifest = json.loads((ROOT / "docs" / "pictures" / "manifest.json").read_text())
    wrong = []
    for picture, uses in _shown().items():
        if not picture.exists():
            wrong += [f"{page} shows {picture.relative_to(ROOT)}, which does not exist" for page, _ in uses]
            continue
        title = _title(picture, manifest)
        wrong += [
            f"{page} names {picture.name} {alt!r}, its title is {title!r}"
            for page, alt in uses
            if alt != title
        ]
    assert not wrong, wrong


def test_the_temporal_ui_screenshots_are_recorded_from_their_script() -> None:
    """docs/pictures/temporal_ui.py shoots them (Chromium and a dev stack: not run here); the
    manifest says so, with the code they show, and --check above compares the hashes."""
    manifest = json.loads((ROOT / "docs" / "pictures" / "manifest.json").read_text())
    for name in ("pictures/temporal-ui.png", "pictures/temporal-ui-failover.png"):
        inputs = list(manifest[name]["inputs"])
        assert "docs/pictures/temporal_ui.py" in inputs, manifest[name]
        assert {"workflows/failover.py", "workflows/migrate.py"} <= set(inputs), manifest[name]
        assert inputs == sorted(_build().SCREENSHOT_INPUTS), manifest[name]


def test_every_picture_is_generated_and_shown() -> None:
    build = _build()
    manifest = json.loads(build.MANIFEST.read_text())
    pictures = {p.resolve() for p in (ROOT / "docs").rglob("*") if p.suffix in (".svg", ".png")}
    generated = {(build.HERE / n).resolve() for n in build.DRAWN} | {
        (ROOT / "docs" / n).resolve() for n in manifest
    }
    assert pictures == generated, f"not generated: {pictures - generated}; missing: {generated - pictures}"
    unshown = pictures - set(_shown())
    assert not unshown, f"no page shows {sorted(str(p.relative_to(ROOT)) for p in unshown)}"
