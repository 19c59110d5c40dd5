"""Screenshot the Temporal UI after a real failover and a migration, on a dev stack of its own.

    .venv/bin/python docs/pictures/temporal_ui.py

Brings up a dev stack on free ports with a worker per region (`drctl dev up --workers`), runs
`drctl failover --to us-east-1` and `drctl migrate --from us-east-1 --to us-west-1` as an operator
would, shoots the UI's workflow list and the failover's page with headless Chromium (Debian's
`chromium` package), records both in manifest.json, and takes the stack down. About two minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from build import MANIFEST, SCREENSHOT_INPUTS, recorded  # noqa: E402

from bench.rto_fleet import write_bench_config  # noqa: E402 - after the path setup above

DRCTL = Path(sys.executable).parent / "drctl"
SHOTS = {
    "pictures/temporal-ui.png": "The Temporal UI: a failover and a migration",
    "pictures/temporal-ui-failover.png": "The Temporal UI: one failover, its input, result and history",
}


def drctl(*args: str, cfg: Path, timeout_s: float = 600) -> str:
    argv = [str(DRCTL), *args, "-c", str(cfg)]
    print("$ drctl", " ".join(args), flush=True)
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout_s, env={**os.environ, "COLUMNS": "160"}
    )
    if proc.returncode != 0:
        raise SystemExit(f"drctl {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def shoot(url: str, out: Path) -> None:
    browser = shutil.which("chromium")
    if browser is None:
        raise SystemExit("no chromium on PATH: apt-get install chromium")
    subprocess.run(
        [browser, "--headless=new", "--no-sandbox", "--hide-scrollbars", "--window-size=1500,900",
         "--virtual-time-budget=8000", f"--screenshot={out}", url],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


def main() -> int:
    import yaml

    cfg = write_bench_config(interval_s=10, threshold=3)
    settings = yaml.safe_load(cfg.read_text())
    ui, namespace = (
        settings["temporal"]["ui_url"].rstrip("/"),
        settings["temporal"].get("namespace", "default"),
    )
    drctl("dev", "up", "--workers", cfg=cfg)
    try:
        drctl("failover", "--to", "us-east-1", "--yes", "--timeout", "5m", cfg=cfg)
        drctl("migrate", "--from", "us-east-1", "--to", "us-west-1", "--yes", "--timeout", "10m", cfg=cfg)
        shown = json.loads(drctl("ops", "show", f"failover/{settings['name']}", "-o", "json", cfg=cfg))
        wid = quote(shown["workflow_id"], safe="")
        shoot(f"{ui}/namespaces/{namespace}/workflows", ROOT / "docs" / "pictures" / "temporal-ui.png")
        shoot(
            f"{ui}/namespaces/{namespace}/workflows/{wid}/{shown['run_id']}/history",
            ROOT / "docs" / "pictures" / "temporal-ui-failover.png",
        )
    finally:
        drctl("dev", "down", cfg=cfg)
    entries = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    for name, title in SHOTS.items():
        entries[name] = recorded(title, ROOT / "docs" / name, SCREENSHOT_INPUTS)
    MANIFEST.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    print(f"wrote {', '.join(SHOTS)} in docs/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
