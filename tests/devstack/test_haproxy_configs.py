"""Every HAProxy config drctl renders or ships loads without a warning, on every HAProxy here.

`haproxy -c -f` on the dev stack's rendered configs (global tier with and without the fast path,
each region gateway) and on compose's shipped ones, with Debian's HAProxy and the 3.2 build.
HAProxy 3.2 warns about what 3.3 will refuse (a backend named like its frontend), so a warning is
a failure here, not noise.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from drctl.config.schema import load_config
from drctl.devstack.haproxy_conf import haproxy_dir, partition_acl, render_global, render_region
from tests.support.config import write_fleet_config
from tests.support.haproxy_binaries import REPO, binaries


def _rendered() -> dict[str, str]:
    out = {}
    for fast_path in (False, True):
        cfg = load_config(write_fleet_config(overrides={"traffic": {"global": {"fast_path": fast_path}}}))
        haproxy_dir(cfg).mkdir(parents=True, exist_ok=True)
        out[f"devstack global{' fast_path' if fast_path else ''}"] = render_global(cfg)
        for r in cfg.regions:
            partition_acl(cfg, r.name).write_text("")  # what the region process writes before start
            out[f"devstack {r.name}"] = render_region(cfg, r.name)
    return out


def _shipped(run_dir: Path) -> dict[str, str]:
    """Compose's configs, with its service names mapped to loopback and its socket dir to run_dir."""
    out = {}
    for name in ("haproxy-global.cfg", "haproxy-region.cfg"):
        text = (REPO / "deploy" / "compose" / name).read_text()
        text = re.sub(r"(gateway-us-\w+-1|vllm-\$\{REGION\}[\w-]*):", "127.0.0.1:", text)
        out[f"compose {name}"] = text.replace("/run/haproxy/", f"{run_dir}/")
    return out


@pytest.mark.parametrize("haproxy", binaries())
def test_every_config_loads_without_warnings(haproxy: str, tmp_path: Path) -> None:
    configs = {**_rendered(), **_shipped(tmp_path)}
    assert len(configs) == 6  # two global tiers, two region gateways, two compose files
    problems = []
    for i, (what, text) in enumerate(configs.items()):
        path = tmp_path / f"{i}.cfg"
        path.write_text(text)
        result = subprocess.run(
            [haproxy, "-c", "-f", str(path)],
            capture_output=True,
            text=True,
            timeout=30,
            env={"REGION": "us-west-1", "PATH": "/usr/sbin:/usr/bin"},
        )
        said = result.stdout + result.stderr
        if result.returncode != 0 or re.search(r"\[(WARNING|ALERT)\]", said):
            problems.append(f"--- {what} (exit {result.returncode}):\n{said}")
    assert not problems, "\n".join(problems)
