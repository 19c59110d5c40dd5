"""Draw the docs' pictures from the code, the config and a recorded bench run.

    .venv/bin/python docs/pictures/build.py            # write them
    .venv/bin/python docs/pictures/build.py --check    # exit 1 naming each picture that is stale

- topology.svg: the traffic tiers of config/fleet.yaml (global tier, region gateways, tracks,
  replicas), the tracks from drctl.config.schema.TRACKS.
- region-states.svg: the region state machine, found by running drctl/decision/verdict.py's
  judge_region from every verdict on every kind of tick, not drawn by hand.
- decision-flow.svg: one decision tick, from drctl/decision/decide.py's rule tuples and each
  rule module's own docstring.
- docs/failover.png: the failover timeline bench/plot_failover.py plots from the recorded run in
  bench/samples/failover.json.

The SVGs are text, written the same way every time, so --check draws them again and compares. The
PNG is not byte-stable across matplotlib versions, so manifest.json records the sha256 of what it
was drawn from and --check compares those. tests/test_docs_pictures.py runs --check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make the repo importable
    sys.path.insert(0, str(ROOT))

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
TIMELINE_NAME = "failover.png"  # manifest keys are paths under docs/
# What the Temporal UI screenshots show (docs/pictures/temporal_ui.py): the script, and the code
# behind what is on screen (the workflows run, their phases, summaries and search attributes).
# A change to any of them makes the screenshots stale until the script is run again.
SCREENSHOTS = ("pictures/temporal-ui.png", "pictures/temporal-ui-failover.png")
SCREENSHOT_INPUTS = [
    "docs/pictures/temporal_ui.py",
    "drctl/client/operations.py",
    "drctl/models/search_attributes.py",
    "workflows/failover.py",
    "workflows/failover_phases.py",
    "workflows/migrate.py",
]
TIMELINE = ROOT / "docs" / TIMELINE_NAME
TIMELINE_TITLE = "A failover's weights and error rate over time"
TIMELINE_INPUTS = ["bench/samples/failover.json", "bench/plot_failover.py"]
FONT = "font-family:DejaVu Sans,Helvetica,Arial,sans-serif"
COLOURS = {
    "HEALTHY": "#cdeccd",
    "DEGRADED": "#fbe7b5",
    "SATURATED": "#f6d2a8",
    "DOWN": "#f4b6b6",
    "RECOVERING": "#c9ddf5",
    "UNKNOWN": "#e2e2e2",
}


class Svg:
    """A few SVG primitives, written in a fixed order so that a redraw is byte-identical."""

    def __init__(self, width: int, height: int, title: str) -> None:
        self.width, self.height = width, height
        self.parts = [
            f"<title>{escape(title)}</title>",
            f'<rect width="{width}" height="{height}" fill="white"/>',
        ]

    def box(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        lines: list[str],
        fill: str = "#f2f2f2",
        head: bool = True,
    ) -> None:
        self.parts.append(
            f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="6" fill="{fill}" stroke="#555"/>'
        )
        top = y + h / 2 - (len(lines) - 1) * 7.5
        for i, line in enumerate(lines):
            bold = head and i == 0
            self.text(
                x + w / 2, top + i * 15, line, size=12 if bold else 10.5, extra=' font-weight="bold"' * bold
            )

    def text(
        self, x: float, y: float, s: str, size: float = 11, anchor: str = "middle", extra: str = ""
    ) -> None:
        self.parts.append(
            f'<text x="{x:g}" y="{y + size / 3:g}" font-size="{size:g}" text-anchor="{anchor}"'
            f' style="{FONT}"{extra}>{escape(s)}</text>'
        )

    def arrow(self, x1: float, y1: float, x2: float, y2: float, label: str = "") -> None:
        self.parts.append(
            f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="#555" marker-end="url(#a)"/>'
        )
        if label:
            self.text((x1 + x2) / 2 + 4, (y1 + y2) / 2 - 6, label, size=9.5, anchor="start")

    def render(self) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}">\n<defs><marker id="a" viewBox="0 0 10 10" refX="10" '
            'refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            '<path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>\n'
        )
        return head + "\n".join(self.parts) + "\n</svg>\n"


def topology() -> str:
    """The three traffic tiers of the dev fleet, as config/fleet.yaml configures them."""
    from drctl.config.schema import TRACKS, load_config

    cfg = load_config(ROOT / "config" / "fleet.yaml")
    n = len(cfg.regions)
    row_h = 70 * len(TRACKS) + 20
    svg = Svg(1000, 90 + n * row_h, f"Traffic tiers of fleet {cfg.name} (config/fleet.yaml)")
    svg.text(500, 22, f"fleet {cfg.name!r}: who sets which weight (config/fleet.yaml)", size=14)
    for x, head in ((110, "global tier"), (370, "regional tier"), (620, "tracks"), (860, "endpoints")):
        svg.text(x, 50, head, size=12, extra=' fill="#666"')
    mid = 80 + n * row_h / 2
    glob = cfg.traffic.global_tier
    svg.box(
        20,
        mid - 40,
        180,
        80,
        ["global endpoint", str(cfg.traffic.global_endpoint), f"{glob.kind}: region weights"],
    )
    for i, region in enumerate(cfg.regions):
        top = 80 + i * row_h
        cy = top + row_h / 2
        svg.arrow(200, mid, 280, cy, f"weight {region.weight}")
        svg.box(
            280,
            cy - 40,
            180,
            80,
            [
                f"{region.name} gateway",
                str(region.gateway_url),
                f"{cfg.traffic.regional_tier.kind}: track weights",
            ],
        )
        for j, track in enumerate(TRACKS):
            ty = top + 10 + j * 70
            svg.arrow(460, cy, 540, ty + 25)
            svg.box(540, ty, 160, 50, [f"{cfg.workload.deployment_name(track)}", f"track {track}"])
            svg.arrow(700, ty + 25, 780, ty + 25)
            count = f"{region.replicas} at steady state" if track == "stable" else "while an upgrade uses it"
            svg.box(780, ty, 200, 50, ["replicas (the platform's)", count], fill="#ffffff")
    return svg.render()


def _tick_kinds() -> list[tuple[str, object]]:
    """One example of each kind of tick verdict.observe tells apart, with its label."""
    from drctl.decision.evidence import CapacityFacts, ProbeFacts, RegionEvidence

    at = datetime(2026, 1, 1, tzinfo=UTC)

    def region(probe: ProbeFacts | None, cap: CapacityFacts | None = None) -> RegionEvidence:
        return RegionEvidence(name="r", home_weight=50, probe=probe, capacity=cap)

    ok = {"answered": True, "completions_ok": 1, "completions_tried": 1, "at": at}
    return [
        ("probe fails", region(ProbeFacts(answered=False, errors=["refused"], at=at))),
        ("no probe", region(None)),
        ("passes, healthy", region(ProbeFacts(**ok))),
        (
            "passes, replicas failing",
            region(ProbeFacts(**ok, replicas_failing=["a", "b"]), CapacityFacts(ready=2, desired=2)),
        ),
        (
            "passes, over capacity",
            region(ProbeFacts(**ok), CapacityFacts(ready=2, desired=2, per_replica=1, load=9)),
        ),
    ]


def transitions() -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(verdict before, kind of tick) -> [(which tick in a row, verdict after)], found by running
    judge_region from every verdict on every kind of tick."""
    from drctl.decision.config import DecisionConfig
    from drctl.decision.evidence import Verdict
    from drctl.decision.memory import RegionMemory
    from drctl.decision.verdict import judge_region

    config = DecisionConfig()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for before in Verdict:
        for label, evidence in _tick_kinds():
            memories = {"": RegionMemory(verdict=before)}
            if label == "probe fails":
                n = config.failure_threshold
                memories = {
                    f"{k}/{n}": RegionMemory(verdict=before, consecutive_failures=k - 1) for k in (1, n)
                }
            elif label.startswith("passes") and before in (Verdict.DOWN, Verdict.RECOVERING):
                n = config.recovery_threshold
                memories = {
                    f"{k}/{n}": RegionMemory(verdict=before, consecutive_successes=k - 1) for k in (1, n)
                }
            for nth, memory in memories.items():
                after, _, _ = judge_region(evidence, memory, config, now)  # type: ignore[arg-type]
                found.setdefault((before.value, label), []).append((nth, after.value))
    return found


def region_states() -> str:
    """The transition table of the region state machine: verdict before (row) x tick (column)."""
    from drctl.decision.config import DecisionConfig

    config = DecisionConfig()
    found = transitions()
    ticks = [label for label, _ in _tick_kinds()]
    cell_w, cell_h, left, top = 175, 44, 130, 90
    svg = Svg(left + cell_w * len(ticks) + 20, top + cell_h * len(COLOURS) + 50, "Region state machine")
    svg.text(
        svg.width / 2, 22, "Region verdict after one tick (drctl/decision/verdict.py judge_region)", size=14
    )
    svg.text(
        svg.width / 2,
        42,
        f"rows: the verdict before; columns: the tick; k/n: the k-th such tick in a row "
        f"(failure_threshold {config.failure_threshold}, recovery_threshold {config.recovery_threshold}, "
        "the config defaults)",
        size=10.5,
    )
    for j, tick in enumerate(ticks):
        svg.text(left + j * cell_w + cell_w / 2, top - 14, tick, size=10.5, extra=' font-weight="bold"')
    for i, before in enumerate(COLOURS):
        y = top + i * cell_h
        svg.box(10, y + 2, left - 20, cell_h - 4, [before], fill=COLOURS[before])
        for j, tick in enumerate(ticks):
            outcomes = found[(before, tick)]
            words = [f"{nth} → {after}" if nth else f"→ {after}" for nth, after in outcomes]
            fill = COLOURS[outcomes[0][1]]
            svg.box(left + j * cell_w + 2, y + 2, cell_w - 4, cell_h - 4, words, fill=fill, head=False)
    svg.text(
        10,
        top + len(COLOURS) * cell_h + 24,
        "DOWN only after failure_threshold failed ticks in a row (and the vantage-point quorum, when "
        "configured); RECOVERING until recovery_threshold passed ticks in a row.",
        size=10,
        anchor="start",
    )
    return svg.render()


def decision_flow() -> str:
    """One decision tick: verdicts, the weights to start from, the rules in priority order."""
    import importlib
    import inspect

    from drctl.decision.rules import reconcile

    decide = importlib.import_module("drctl.decision.decide")  # the package re-exports the function

    def gist(obj: object) -> str:
        doc = " ".join((inspect.getdoc(obj) or "").split())
        return doc.split(": ", 1)[-1].split(". ")[0].rstrip(".")

    # (heading, what it does, fill, whether it is a rule that can fire)
    steps: list[tuple[str, str, str, bool]] = [
        ("evidence", "probes, passive signals, capacity, weights in effect", "#ffffff", False),
        ("verdicts", "judge_region per region (the state machine)", COLOURS["RECOVERING"], False),
        ("weights to start from", gist(decide.prepare), "#f2f2f2", False),
    ]
    for rule in decide.SAFETY_RULES:
        steps.append(
            (f"safety rule: {rule.__name__}", gist(sys.modules[rule.__module__]), COLOURS["DOWN"], True)
        )
    for rule in decide.BALANCE_RULES:
        steps.append(
            (f"balance rule: {rule.__name__}", gist(sys.modules[rule.__module__]), COLOURS["DEGRADED"], True)
        )
    steps.append((f"rule: {reconcile.RULE}", gist(reconcile), COLOURS["UNKNOWN"], True))
    steps.append(("hold", "nothing fired: the weights stay", "#ffffff", False))
    box_w, box_h, gap = 720, 58, 20
    svg = Svg(box_w + 180, 80 + len(steps) * (box_h + gap), "Decision flow of one monitor tick")
    svg.text(
        svg.width / 2,
        24,
        "One monitor tick (drctl/decision/decide.py): the first rule that fires decides",
        size=14,
    )
    for i, (head, what, fill, fires) in enumerate(steps):
        y = 50 + i * (box_h + gap)
        svg.box(20, y, box_w, box_h, [head, *textwrap.wrap(what, 115)[:2]], fill=fill)
        if i + 1 < len(steps):
            svg.arrow(20 + box_w / 2, y + box_h, 20 + box_w / 2, y + box_h + gap, "else" if fires else "")
        if fires:
            svg.arrow(20 + box_w, y + box_h / 2, box_w + 60, y + box_h / 2)
            svg.text(box_w + 66, y + box_h / 2, "fires: decided", size=10, anchor="start")
    svg.text(
        20,
        50 + len(steps) * (box_h + gap) + 4,
        "Balance rules run only when the weights in effect are readable and no back-off holds; "
        "invariants (drctl/decision/invariants.py) are checked after every decision.",
        size=10,
        anchor="start",
    )
    return svg.render()


DRAWN: dict[str, Callable[[], str]] = {
    "topology.svg": topology,
    "region-states.svg": region_states,
    "decision-flow.svg": decision_flow,
}


def _sha(paths: list[str]) -> dict[str, str]:
    return {p: hashlib.sha256((ROOT / p).read_bytes()).hexdigest() for p in paths}


def recorded(title: str, picture: Path, inputs: list[str]) -> dict[str, object]:
    """A manifest entry: the picture's title (the alt text docs give it), the sha256 of each input
    it was made from, and its own."""
    return {
        "title": title,
        "inputs": _sha(inputs),
        "sha256": hashlib.sha256(picture.read_bytes()).hexdigest(),
    }


def _manifest() -> dict[str, dict[str, object]]:
    return json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}  # type: ignore[no-any-return]


def stale() -> list[str]:
    """The pictures that differ from what the code, config and samples draw now."""
    found = [
        name
        for name, draw in DRAWN.items()
        if not (HERE / name).exists() or (HERE / name).read_text() != draw()
    ]
    entries = _manifest()
    timeline = entries.get(TIMELINE_NAME, {})
    if sorted(timeline.get("inputs", {})) != sorted(TIMELINE_INPUTS):  # type: ignore[call-overload]
        found.append(TIMELINE_NAME)
    for name in SCREENSHOTS:
        if sorted(entries.get(name, {}).get("inputs", {})) != sorted(SCREENSHOT_INPUTS):  # type: ignore[call-overload]
            found.append(name)
    for name, entry in entries.items():
        picture = ROOT / "docs" / name
        inputs = sorted(entry.get("inputs", {}))  # type: ignore[call-overload]
        if name in found:
            continue
        if not picture.exists() or entry != recorded(str(entry.get("title")), picture, inputs):
            found.append(name)
    return found


def build() -> None:
    from bench.plot_failover import plot

    for name, draw in DRAWN.items():
        (HERE / name).write_text(draw())
    plot(json.loads((ROOT / TIMELINE_INPUTS[0]).read_text()), TIMELINE)
    # Other entries (the Temporal UI screenshot) are written by the command that makes them.
    entries = _manifest() | {TIMELINE_NAME: recorded(TIMELINE_TITLE, TIMELINE, TIMELINE_INPUTS)}
    MANIFEST.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="docs/pictures/build.py", description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="Write nothing; exit 1 naming each stale picture.")
    args = p.parse_args(argv)
    if args.check:
        old = stale()
        for name in old:
            print(f"{name} is stale: run .venv/bin/python docs/pictures/build.py", file=sys.stderr)
        return 1 if old else 0
    build()
    print(f"wrote {', '.join(DRAWN)} in docs/pictures/ and docs/failover.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
