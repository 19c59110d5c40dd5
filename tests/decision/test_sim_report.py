"""The run figures, on hand-made samples: what counts as unsafe, safe again, and the objective."""

from __future__ import annotations

from drctl.simulation.report import FamilyRow, Sample, format_table, measure, summarise


def _samples(*rows: tuple[dict[str, int], set[str], float]) -> list[Sample]:
    return [Sample(float(t), w, frozenset(dead), err, 100.0) for t, (w, dead, err) in enumerate(rows)]


def test_time_to_safe_is_the_longest_stretch_of_weight_on_a_dead_region_while_another_serves() -> None:
    up, down = {"a": 60, "b": 40}, {"a": 0, "b": 100}
    samples = _samples(
        (up, set(), 0.0),
        (up, {"a"}, 0.6),
        (up, {"a"}, 0.6),
        (up, {"a"}, 0.6),
        (down, {"a"}, 0.0),
        (up, {"a", "b"}, 1.0),  # nobody can serve: not unsafe, there is nowhere to go
        (down, set(), 0.0),
    )
    m = measure(samples, 1.0, offered=70.0, failed=2.8, moves=2, slo_ttft_p99_ms=200, slo_error_rate=0.01)
    assert (m.safe_s, m.never_safe, m.moves) == (3.0, False, 2)
    assert m.objective_s == 5.0  # broken from t=1 to the end of t=5
    assert m.user_error_share == 2.8 / 70.0


def test_a_run_that_ends_unsafe_or_over_the_objective_never_got_there() -> None:
    samples = _samples(({"a": 50, "b": 50}, set(), 0.0), ({"a": 50, "b": 50}, {"a"}, 0.5))
    m = measure(samples, 1.0, offered=1.0, failed=0.5, moves=0, slo_ttft_p99_ms=200, slo_error_rate=0.01)
    assert m.never_safe and m.objective_s is None
    quiet = measure(
        samples[:1], 0.0, offered=1.0, failed=0.0, moves=0, slo_ttft_p99_ms=200, slo_error_rate=0.01
    )
    assert quiet.safe_s is None and quiet.objective_s == 0.0 and not quiet.never_safe


def test_the_family_row_gives_median_and_worst_and_counts_the_nevers() -> None:
    samples = _samples(({"a": 50, "b": 50}, {"a"}, 0.5), ({"a": 0, "b": 100}, {"a"}, 0.0))
    fixed = measure(samples, 0.0, offered=2.0, failed=0.5, moves=1, slo_ttft_p99_ms=200, slo_error_rate=0.01)
    stuck = measure(
        samples[:1], 0.0, offered=1.0, failed=0.5, moves=0, slo_ttft_p99_ms=200, slo_error_rate=0.01
    )
    row = summarise("down", "core", [fixed, fixed, stuck])
    assert row == FamilyRow(
        "down", "core", 3, "1/1 (1 unsafe at end)", "1/1 (1 never)", "33.33%/50.00%", "0.7/1"
    )
    table = format_table([row]).splitlines()
    assert table[0].split()[:3] == ["family", "policy", "runs"] and table[1].split()[:3] == [
        "down",
        "core",
        "3",
    ]
