"""A shipped dev-stack config (config/*.yaml) moved onto free loopback ports, its state under a
short /tmp dir: the same file a user runs `drctl dev up -c` on, brought up beside other stacks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.support.config import short_tmp_dir
from tests.support.ports import free_port, free_port_run

# The shipped file's fixed ports (dev stack defaults), each moved to a free one.
_PORT = re.compile(r"(?<=127\.0\.0\.1:)\d+")


def _moved(value: Any, ports: dict[str, str], state: str) -> Any:
    if isinstance(value, dict):
        return {k: _moved(v, ports, state) for k, v in value.items()}
    if isinstance(value, list):
        return [_moved(v, ports, state) for v in value]
    if isinstance(value, str):
        value = _PORT.sub(lambda m: ports.setdefault(m.group(0), str(free_port())), value)
        return value.replace(f"../.drctl/{state}/", "s/").replace(f"../.drctl/{state}", "s")
    return value


def relocated(shipped: Path, overrides: dict[str, Any] | None = None) -> Path:
    """`shipped` on free ports (its state dir `../.drctl/<name>` moved to `s/` beside the copy),
    with `overrides` set at the top level; the copy's path."""
    data = yaml.safe_load(shipped.read_text())
    state = Path(data["devstack"]["state_dir"]).name
    data = _moved(data, {}, state)
    data["devstack"].update(
        stats_port=free_port(),
        prometheus_port=free_port(),
        worker_http_port=free_port_run(len(data["regions"]), host="127.0.0.1"),
    )
    data.update(overrides or {})
    path = short_tmp_dir() / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
