"""Many fleets in one worker process: which configs may share it.

The fleets share one Temporal client, one activity thread pool and one HTTP endpoint; each keeps
its own task queues. Temporal routes a task by its queue name alone, so two fleets naming the same
queue would run each other's activities with the wrong config: refused before anything starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from drctl.config.schema import FleetConfig

CONFIG_SUFFIXES = (".yaml", ".yml")
# The connection settings of one shared client; task_queue and ui_url may differ per fleet.
_CLIENT_FIELDS = {"address", "namespace", "tls", "api_key_env", "codec"}


class FleetsError(ValueError):
    """The configs cannot share one worker; the message names the files."""


def _where(cfg: FleetConfig) -> str:
    return cfg.source_path or f"fleet {cfg.name!r}"


def config_files(paths: Sequence[Path], dirs: Sequence[Path]) -> list[Path]:
    """The files named, then each directory's *.yaml / *.yml in name order (no recursion)."""
    files = list(paths)
    for d in dirs:
        if not d.is_dir():
            raise FleetsError(f"--config-dir {d}: not a directory")
        found = sorted(p for p in d.iterdir() if p.suffix in CONFIG_SUFFIXES and p.is_file())
        if not found:
            raise FleetsError(f"--config-dir {d}: no *.yaml or *.yml fleet config in it")
        files += found
    return files


def queues_of(cfg: FleetConfig, regions: Sequence[str] | None, *, main: bool) -> list[str]:
    """The task queues this fleet's workers poll (the main queue, then each served region's)."""
    served = regions if regions is not None else cfg.region_names
    return ([cfg.temporal.task_queue] if main else []) + [cfg.region(r).queue for r in served]


def check_fleets(
    cfgs: Sequence[FleetConfig], regions: Sequence[str] | None = None, *, main: bool = True
) -> None:
    """Raise FleetsError unless every fleet has its own name and queues and all share one Temporal."""
    names: dict[str, FleetConfig] = {}
    owner: dict[str, FleetConfig] = {}
    first = cfgs[0] if cfgs else None
    for cfg in cfgs:
        if cfg.name in names:
            raise FleetsError(
                f"fleet name {cfg.name!r} is in both {_where(names[cfg.name])} and {_where(cfg)}: "
                "monitors, locks and metrics are keyed by it"
            )
        names[cfg.name] = cfg
        if first is not None and _client(cfg) != _client(first):
            raise FleetsError(
                f"{_where(cfg)} and {_where(first)} name different Temporal connections "
                f"({', '.join(sorted(_CLIENT_FIELDS))} must match): one worker has one client"
            )
        for r in regions or []:
            if r not in cfg.region_names:
                raise FleetsError(
                    f"--region {r}: {_where(cfg)} has no such region; known: {', '.join(cfg.region_names)}"
                )
        for q in queues_of(cfg, regions, main=main):
            other = owner.get(q)
            if other is not None and other is not cfg:
                raise FleetsError(
                    f"task queue {q!r} is used by both {_where(other)} and {_where(cfg)}: "
                    "each fleet needs its own queues (temporal.task_queue, regions[].task_queue)"
                )
            owner[q] = cfg


def _client(cfg: FleetConfig) -> dict[str, object]:
    return cfg.temporal.model_dump(include=_CLIENT_FIELDS)
