"""Applying a changed fleet config to a running monitor: pure, so it is unit-tested without Temporal.

`drctl monitor start` against a running monitor sends the current config's FleetSpec; the monitor
applies it between probe rounds with `apply_spec`.
"""

from __future__ import annotations

from pydantic import BaseModel

from drctl.models.fleet_spec import FleetSpec
from drctl.models.monitor import MonitorState, RegionTracker


class SpecUpdate(BaseModel):
    spec: FleetSpec


def spec_problems(current: FleetSpec, new: FleetSpec) -> list[str]:
    """Why `new` cannot replace `current` in a running monitor (empty: it can)."""
    problems = []
    if new.fleet != current.fleet:
        problems.append(f"the config is for fleet {new.fleet!r}, this monitor watches {current.fleet!r}")
    if new.task_queue != current.task_queue:
        # Children and the monitor's next run would land on another queue than its worker's.
        problems.append(
            f"temporal.task_queue changed ({current.task_queue} → {new.task_queue}): "
            "stop the monitor and start it again"
        )
    if not new.regions or sum(r.weight for r in new.regions) <= 0:
        problems.append("the new config has no region with weight")
    return problems


def spec_changes(old: FleetSpec, new: FleetSpec) -> list[str]:
    """What differs, one line per change, for the operator and the workflow log."""
    out = []
    before, after = {r.name: r for r in old.regions}, {r.name: r for r in new.regions}
    if added := [n for n in after if n not in before]:
        out.append(f"regions added: {', '.join(added)}")
    if removed := [n for n in before if n not in after]:
        out.append(f"regions removed: {', '.join(removed)}")
    for name in after:
        if name in before and before[name] != after[name]:
            a, b = before[name].model_dump(), after[name].model_dump()
            out += [f"{name}.{k}: {a[k]} → {b[k]}" for k in a if a[k] != b[k]]
    a, b = old.model_dump(exclude={"regions"}), new.model_dump(exclude={"regions"})
    out += [f"{k}: {a[k]} → {b[k]}" for k in a if a[k] != b[k]]
    return out


def apply_spec(state: MonitorState, new: FleetSpec) -> list[str]:
    """Make `state` follow `new`; returns the changes. Surviving regions keep their state machines.

    The policy follows the config only when the config's policy changed: an operator's
    `set_policy` override survives a re-run of `drctl monitor start` with the same file.
    """
    changes = spec_changes(state.spec, new)
    names = [r.name for r in new.regions]
    state.trackers = {n: state.trackers.get(n) or RegionTracker(region=n) for n in names}
    state.failed_over = [r for r in state.failed_over if r.source in names and r.target in names]
    state.avoid_targets = {r: t for r, t in state.avoid_targets.items() if r in names}
    state.unresolved = {r: why for r, why in state.unresolved.items() if r in names}
    if new.policy != state.spec.policy:
        state.policy = new.policy
    state.spec = new
    return changes
