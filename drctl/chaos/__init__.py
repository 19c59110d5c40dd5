"""drctl's own Chaos Toolkit activities, called by `module`/`func` from the experiments in experiments/.

Chaos Toolkit runs them in its own `chaos run` process, so they receive everything through the
experiment's `configuration` block (each key overridable from the environment):

- `fleet_config`: path of the fleet config (env DRCTL_CONFIG); gives the allow-list, the fault
  injector and the region endpoints;
- `global_endpoint`: the URL clients use (env DRCTL_GLOBAL_ENDPOINT); empty means the fleet's;
- `target_region`: the region the experiment hurts (env DRCTL_DRILL_TARGET);
- `rto_target_s`: how long traffic may take to be served elsewhere (env DRCTL_RTO_TARGET_S).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from drctl.config.schema import FleetConfig, load_config

# Configuration keys every drctl experiment declares, and the env vars that override them.
CONFIG_ENV = {
    "fleet_config": "DRCTL_CONFIG",
    "global_endpoint": "DRCTL_GLOBAL_ENDPOINT",
    "target_region": "DRCTL_DRILL_TARGET",
    "rto_target_s": "DRCTL_RTO_TARGET_S",
}


class TargetNotAllowed(Exception):
    """A fault aimed at a region the fleet config does not allow drills to hurt."""


@lru_cache(maxsize=4)
def _load(path: str) -> FleetConfig:
    return load_config(path)


def fleet(configuration: dict[str, Any] | None) -> FleetConfig:
    """The fleet config named by the experiment's `fleet_config` key."""
    path = (configuration or {}).get("fleet_config")
    if not path:
        raise ValueError("experiment configuration has no 'fleet_config' (set it or DRCTL_CONFIG)")
    return _load(str(path))


def global_endpoint(configuration: dict[str, Any] | None) -> str:
    url = (configuration or {}).get("global_endpoint")
    if url:
        return str(url).rstrip("/")
    return fleet(configuration).traffic.global_endpoint.rstrip("/")


def ensure_allowed(cfg: FleetConfig, region: str) -> None:
    """Refuse a fault on a region the fleet has not allow-listed for drills."""
    if region not in cfg.drills.allowed_targets:
        allowed = ", ".join(cfg.drills.allowed_targets) or "none"
        raise TargetNotAllowed(
            f"region {region!r} is not an allowed drill target (drills.allowed_targets: {allowed})"
        )
