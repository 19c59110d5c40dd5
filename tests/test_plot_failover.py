"""bench/plot_failover.py re-plots the saved samples of a real failover (the README's figure)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "bench" / "samples" / "failover.json"


def _plot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "plot_failover.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def _t(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def test_saved_failover_samples_are_a_real_succeeded_failover() -> None:
    data = json.loads(SAMPLES.read_text())
    assert data["status"] == "succeeded" and data["source"] != data["target"]
    # Weights read from the global tier moved from the configured split to all on the target.
    first, last = data["weights"][0]["weights"], data["weights"][-1]["weights"]
    assert first[data["source"]] > 0 and last == {data["source"]: 0, data["target"]: 100}
    # The load saw errors after the fault and none once the failover was verified.
    fault, shifted, verified = (_t(data[k]) for k in ("fault_at", "shifted_at", "verified_at"))
    after = [s for s in data["load"] if _t(s["t"]) > verified]
    assert after and all(s["ok"] and s["region"] == data["target"] for s in after)
    assert any(not s["ok"] for s in data["load"] if fault < _t(s["t"]) < shifted)


def test_plot_from_saved_samples_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "failover.png"
    done = _plot("--from", str(SAMPLES), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000


def test_unreadable_samples_exit_2_naming_the_file(tmp_path: Path) -> None:
    done = _plot("--from", str(tmp_path / "missing.json"), "--out", str(tmp_path / "x.png"))
    assert done.returncode == 2 and "missing.json: cannot read samples" in done.stderr
