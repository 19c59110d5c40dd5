"""Replay one simulated world and print its trace: `python -m drctl.simulation --seed N --family F`.

Exit 0 when the run holds every invariant, 1 with the violation when it does not, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from drctl.simulation.run import InvariantViolated, RunResult, Tick, run
from drctl.simulation.scenarios import FAMILIES, generate


def _weights(weights: dict[str, int] | None) -> str:
    return "unreadable" if weights is None else "/".join(str(w) for w in weights.values())


def format_tick(tick: Tick) -> str:
    """One line per decision: time, weights in effect -> target, verdicts, action, rule and reason."""
    d = tick.decision
    verdicts = " ".join(f"{name}={v.value}" for name, v in d.verdicts.items())
    reason = d.reasons[0] if d.reasons else ""
    wrote = " wrote" if tick.written else ""
    return (
        f"t={tick.t_s:5.0f}s  in effect {_weights(tick.evidence.weights_in_effect):>14} -> "
        f"{_weights(d.weights_after):<14} {d.action:<9}{wrote:<6} errors {tick.error_share * 100:5.1f}%  "
        f"{verdicts}  [{d.rule}] {reason}"
    )


def format_run(result: RunResult) -> str:
    lines = [
        result.scenario.describe(),
        f"policy {result.policy}; weights in order of: " + ", ".join(r.name for r in result.scenario.regions),
    ]
    lines += [format_tick(t) for t in result.ticks]
    m = result.metrics
    if m is not None:
        safe = "n/a" if m.safe_s is None else ("never" if m.never_safe else f"{m.safe_s:g}s")
        objective = "never" if m.objective_s is None else f"{m.objective_s:g}s"
        lines.append(
            f"time to safe {safe}; time to objective {objective}; "
            f"user error share {m.user_error_share * 100:.2f}%; moves {m.moves}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m drctl.simulation", description=__doc__)
    parser.add_argument("--seed", type=int, required=True, help="the world's seed")
    parser.add_argument("--family", required=True, choices=FAMILIES, help="the fault family")
    parser.add_argument("--policy", default="core", choices=("core", "baseline"), help="who decides")
    args = parser.parse_args(argv)
    try:
        result = run(generate(args.seed, args.family), args.policy)
    except InvariantViolated as exc:
        print(format_run(exc.result))
        print(f"invariant violated {exc}", file=sys.stderr)
        return 1
    print(format_run(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
