"""A failing world can be found again: the checks fail loudly with the seed, and the command replays it.

The invariant checks are shown to fail on policies built to break them (so the 320 passing worlds
mean something), and `python -m drctl.simulation --seed N --family F` prints the same trace twice.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from drctl.decision.decision import Decision
from drctl.decision.evidence import FleetEvidence, Verdict
from drctl.simulation.__main__ import format_run
from drctl.simulation.policies import CorePolicy
from drctl.simulation.run import InvariantViolated, decision_config, run
from drctl.simulation.scenarios import generate

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class _Stubborn(CorePolicy):
    """The core, except that it never lets traffic leave a DOWN region: such a move becomes a hold."""

    def decide(self, evidence: FleetEvidence, now: datetime) -> Decision:
        d = super().decide(evidence, now)
        down = [r for r, v in d.verdicts.items() if v is Verdict.DOWN]
        if not any(d.weights_after[r] < d.weights_before[r] for r in down):
            return d
        return d.model_copy(update={"action": "hold", "weights_after": dict(d.weights_before)})


@dataclass
class _Reckless(CorePolicy):
    """The core, except that a failover sends ten points back onto the region it drained."""

    def decide(self, evidence: FleetEvidence, now: datetime) -> Decision:
        d = super().decide(evidence, now)
        down = [r for r, v in d.verdicts.items() if v is Verdict.DOWN and d.weights_before[r] == 0]
        if not down:
            return d
        after = dict(d.weights_after)
        donor = max(after, key=lambda r: after[r])
        after[donor], after[down[0]] = after[donor] - 10, after[down[0]] + 10
        return d.model_copy(update={"action": "shed", "weights_after": after})


def test_a_policy_that_keeps_weight_on_a_dead_region_fails_with_the_seed_and_the_replay_command() -> None:
    scenario = generate(3, "down")
    with pytest.raises(InvariantViolated) as caught:
        run(scenario, _Stubborn(decision_config(scenario)))
    text = str(caught.value)
    assert "down_drained_within_rto" in text
    assert "python -m drctl.simulation --seed 3 --family down --policy core" in text
    assert scenario.describe() in text
    # The run up to the violation is kept for the trace.
    trace = format_run(caught.value.result)
    assert trace.startswith("seed 3 family down:") and "DOWN" in trace


def test_a_policy_that_moves_share_onto_a_down_region_fails_at_that_decision() -> None:
    scenario = generate(3, "down")
    with pytest.raises(InvariantViolated, match="no_share_onto_unsafe: .* is DOWN"):
        run(scenario, _Reckless(decision_config(scenario)))


def _replay(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "drctl.simulation", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_python_m_drctl_simulation_replays_one_world_and_prints_the_same_trace_every_time() -> None:
    first, again = (
        _replay("--seed", "3", "--family", "cascade"),
        _replay("--seed", "3", "--family", "cascade"),
    )
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].startswith("seed 3 family cascade: ") and re.search(r"(faults: |; )down ", lines[0])
    assert lines[1].startswith("policy core; weights in order of: ")
    ticks = [line for line in lines if line.startswith("t=")]
    assert len(ticks) >= 240 / 10 and any(" failover " in t and " wrote " in t for t in ticks)
    assert lines[-1].startswith("time to safe ") and "moves" in lines[-1]
    assert first.stdout == again.stdout
    baseline = _replay("--seed", "3", "--family", "cascade", "--policy", "baseline")
    assert baseline.returncode == 0 and "policy baseline;" in baseline.stdout


def test_python_m_drctl_simulation_refuses_an_unknown_family_naming_it() -> None:
    done = _replay("--seed", "1", "--family", "meteor")
    assert done.returncode == 2 and "invalid choice: 'meteor'" in done.stderr and not done.stdout
