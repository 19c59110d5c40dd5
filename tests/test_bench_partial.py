"""bench/partial.py without a stack: its command line, the capacity it loads, and the table it prints.

A real run brings its own dev stack up and holds each arm for minutes (tests/test_bench_runs.py runs
a short one); here the arithmetic that turns an arm's recorded reads and requests into the printed
figures is checked on SignalSnapshot records shaped as the replicas' /metrics give them.
"""

from __future__ import annotations

import shutil

import pytest

from bench import rto_fleet
from bench.partial import bench_config, capacity, parse_args
from bench.partial_report import (
    ArmRecord,
    Read,
    Request,
    format_table,
    intervals,
    peak_waiting,
    summarise,
    window_ttft,
)
from drctl.models.passive import HistogramSnapshot, SignalSnapshot
from drctl.models.slo import SloObjective
from tests.support.argv import refusal_test

EDGES = (0.25, 0.5, 1.0, 2.5)
OBJ = SloObjective(ttft_p99_ms=600, error_rate=0.01, window_s=2)


def snap(source: str, region: str, t: float, counts: tuple[float, ...], queue: float) -> SignalSnapshot:
    """One replica read: cumulative TTFT bucket counts on EDGES (the last one is also the total)."""
    return SignalSnapshot(
        source=source,
        kind="replica",
        region=region,
        taken_at=t,
        requests_total=counts[-1],
        errors_total=0,
        ttft=HistogramSnapshot(buckets=list(zip(EDGES, counts, strict=True)), count=counts[-1]),
        queue=queue,
    )


# us-west-1's survivor answers 10 first tokens in (1, 2.5] s in the first second after the fault, then
# 10 fast ones a second; us-east-1 has one replica from the start and a second from t=2 (a scale-up).
W1 = [(10, 10, 10, 10), (10, 10, 10, 20), (20, 20, 20, 30), (30, 30, 30, 40), (40, 40, 40, 50)]
W1_QUEUE = [4, 9, 6, 2, 0]
E1_QUEUE = [0, 3, 5, 1, 0]
E2 = {2: ((0, 0, 0, 0), 2), 3: ((10, 10, 10, 10), 0), 4: ((20, 20, 20, 20), 0)}


def _reads() -> list[Read]:
    out = []
    for t in range(5):
        snaps = [
            snap("w1", "us-west-1", t, W1[t], W1_QUEUE[t]),
            snap("e1", "us-east-1", t, (10.0 * (t + 1),) * 4, E1_QUEUE[t]),
        ]
        if t in E2:
            snaps.append(snap("e2", "us-east-1", t, E2[t][0], E2[t][1]))
        out.append(Read(t_s=t, snapshots=snaps, weights={"us-west-1": 60, "us-east-1": 40}))
    return out


def _requests() -> list[Request]:
    # 10 users' requests end in each second; 2 of the first second's fail (the killed replica's).
    return [
        Request(sent_s=s - 2.65 + i / 10, done_s=s + i / 10, ok=not (s == 0 and i < 2), region="us-east-1")
        for s in range(4)
        for i in range(10)
    ]


RECORD = ArmRecord(arm="rebalance", window_s=4, reads=_reads(), requests=_requests())


def test_defaults_and_arms_in_their_fixed_order() -> None:
    args = parse_args([])
    assert (args.minutes, args.load_fraction, args.seed, args.json) == (3.0, 0.7, None, None)
    assert args.spare_replicas == 2
    assert args.arms == ["none", "failover", "rebalance"]
    assert parse_args(["--arms", "rebalance,none,none"]).arms == ["none", "rebalance"]


BAD_ARGUMENTS = [
    (["--arms", "none,dns"], "--arms: unknown arm 'dns'; known: none, failover, rebalance"),
    (["--arms", ","], "--arms: no arm given"),
    (["--minutes", "0"], "--minutes must be in (0, 30]"),
    (["--load-fraction", "1.5"], "--load-fraction must be in (0, 1]: the load must stay bounded"),
    (["--seed", "x"], "--seed: invalid int value: 'x'"),
    (["--spare-replicas", "9"], "--spare-replicas must be in [0, 8]"),
]

test_bad_arguments_exit_2_naming_the_problem = refusal_test(parse_args, BAD_ARGUMENTS)


def test_load_is_the_fraction_of_replicas_x_max_num_seqs_over_one_requests_service_time() -> None:
    path = rto_fleet.write_bench_config(interval_s=10, threshold=3)
    try:
        cfg = bench_config(rto_fleet.load(path))
        assert cfg.workload.max_concurrency_per_replica == 16  # fleetsim's max_num_seqs
        # us-west-1 lost a node and has no spare; us-east-1's HPA may grow by 2 replicas.
        assert [(r.name, r.max_replicas) for r in cfg.regions] == [("us-west-1", 2), ("us-east-1", 4)]
        assert [r.max_replicas for r in bench_config(rto_fleet.load(path), 0).regions] == [2, 2]
        assert cfg.objectives.slo.ttft_p99_ms == 600  # 4 x the 150 ms steady TTFT, as bench/rto.py
        cap = capacity(cfg, 0.7)
    finally:
        shutil.rmtree(path.parent)
    # 150 ms to the first token, then 511 more at 5 ms: 2.705 s a request holds a slot.
    assert (cap["capacity_concurrency"], cap["service_s"], cap["capacity_rps"]) == (64, 2.705, 23.66)
    assert (cap["load_rps"], cap["load_concurrency"]) == (16.56, 44.8)


def test_window_ttft_sums_every_replicas_increase_including_one_that_came_later() -> None:
    reads = _reads()
    # 90 first tokens under 250 ms, 10 in (1, 2.5] s: histogram_quantile's interpolation.
    assert window_ttft(reads) == (pytest.approx(138.9), pytest.approx(2350.0))
    assert window_ttft(reads, "us-west-1")[1] == pytest.approx(2440.0)
    assert window_ttft(reads, "us-east-1")[1] == pytest.approx(247.5)
    assert window_ttft([]) == (None, None)


def test_peak_waiting_is_the_regions_sum_at_one_read() -> None:
    assert peak_waiting(_reads(), "us-east-1") == 7  # 5 + the new replica's 2 at t=2
    assert peak_waiting(_reads(), "us-west-1") == 9
    assert peak_waiting(_reads(), "eu-west-1") is None


def test_intervals_carry_the_servers_p99_and_the_users_errors() -> None:
    ivs = intervals(_reads(), _requests())
    assert [(iv.requests, iv.errors) for iv in ivs] == [(10, 2), (10, 0), (10, 0), (10, 0)]
    assert [iv.breaches(OBJ) != [] for iv in ivs] == [True, False, False, False]


def test_summary_restores_at_the_start_of_the_first_held_window() -> None:
    s = summarise(RECORD, OBJ)
    assert (s.requests, s.errors, s.error_rate) == (40, 2, 0.05)
    assert s.sent_rps == 3.25  # 13 of the 40 were sent after the fault, in its 4 s
    assert (s.restored_s, s.within_pct) == (1.0, 75.0)
    assert (s.survivor_peak_waiting, s.source_peak_waiting) == (7, 9)
    assert "held 2.0s" in s.evidence


def test_a_region_that_never_recovers_prints_never_and_why() -> None:
    slow = [(0, 0, 0, 10.0 * (t + 1)) for t in range(5)]  # every first token in (1, 2.5] s
    reads = [
        Read(
            t_s=t,
            snapshots=[snap("w1", "us-west-1", t, slow[t], 20)],
            weights={"us-west-1": 60, "us-east-1": 40},
        )
        for t in range(5)
    ]
    rec = ArmRecord(arm="none", window_s=4, reads=reads, requests=_requests())
    rows = [summarise(rec, OBJ), summarise(RECORD, OBJ)]
    assert rows[0].restored_s is None and rows[0].within_pct == 0.0
    text = format_table(rows, OBJ).splitlines()
    assert text[0].split()[:5] == ["arm", "requests", "errors", "TTFT", "p50"]
    assert text[2].split() == "none 40 5.0% 1750 2485 2485 - - 20 0% never 60/40".split()
    assert text[3].split() == "rebalance 40 5.0% 139 2350 2440 248 7 9 75% 1.0s 60/40".split()
    assert "TTFT p99 <= 600 ms and errors <= 1.0%, held 2s" in text[5]
    assert text[6].split()[:4] == ["none", "ttft_p99", "2485", "ms"]
