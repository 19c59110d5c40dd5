"""Hypothesis explores worlds beyond the 320 fixed seeds: any seed, any family, bounded in count.

Derandomized, so `make test` sees the same 40 worlds every run and cannot turn red by chance; a
wider search is `bench/decisions.py --first-seed N --seeds M`, which lists every world the core
breaks. A failure here prints its seed and family; replay it with
`python -m drctl.simulation --seed N --family F`.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drctl.simulation.run import decision_config, run
from drctl.simulation.scenarios import FAMILIES, generate


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=32, max_value=10**9), family=st.sampled_from(FAMILIES))
def test_any_world_keeps_the_invariants_and_drains_a_dead_region_within_the_rto(
    seed: int, family: str
) -> None:
    result = run(generate(seed, family), "core")  # InvariantViolated names the seed and family
    m = result.metrics
    assert m is not None
    rto = decision_config(result.scenario).rto_target_s
    assert m.safe_s is None or m.safe_s <= rto, result.scenario.describe()
