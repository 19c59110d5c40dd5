"""The kill points the crash suite tries, and the docs/tests.md table rendered from them.

tests/crash/test_readme_table.py keeps docs/tests.md's "Kill points" table equal to `markdown_table()`,
so the page lists exactly what the suite parametrizes.
"""

from __future__ import annotations

from drctl.config.capacity import SloConfig
from tests.crash.harness import KillPoint

# The kill points the suite tries. A fast activity is caught in flight by stalling what it talks to
# (`stall`) once the activity before it has been scheduled (`stall_after`).
KILL_POINTS = [
    KillPoint("Failover", "claim", "acquire_fleet", stall="lock:failover"),
    KillPoint("Failover", "preflight", "probe_region", stall="gateway:us-east-1"),
    KillPoint("Failover", "scale target", "wait_rollout"),
    KillPoint("Failover", "set weights", "set_global_weights", stall="global", stall_after="wait_rollout"),
    KillPoint("Failover", "verify", "verify_global", tweak={"failover": {"verify_requests": 60}}),
    # No user load in the suite, so the watch reports an idle target after one window: 10 s keeps it
    # in flight long enough to be caught, and its retry still fits its bound (rto_target + window).
    KillPoint(
        "Failover", "SLO restored", "watch_slo", tweak={"objectives": {"slo": SloConfig(window_s=10.0)}}
    ),
    # Emergency mode scales after the shift and its verification, which need no API server.
    KillPoint(
        "Failover (emergency)",
        "scale target",
        "scale_deployment",
        stall="kube:us-east-1",
        stall_after="verify_global",
    ),
    # Forced (no target probe), verification fails, the source is probed UP, then the restore.
    KillPoint(
        "Failover (verify fails)",
        "compensate: restore weights",
        "set_global_weights",
        nth=2,
        stall="global",
        stall_after="probe_region",
    ),
    KillPoint("Failback", "claim", "acquire_fleet", stall="lock:failback"),
    KillPoint("Failback", "read weights", "get_global_weights", stall="global"),
    # A 3 s window: the gateway resumed after its stall answers again within a second or two on a
    # loaded machine, and the failback's deadline (4 windows + 3 intervals + one lost probe) must hold that.
    KillPoint(
        "Failback",
        "stabilize",
        "probe_regions",
        stall="gateway:us-west-1",
        tweak={"input": {"stabilization_window_s": 3.0}},
    ),
    KillPoint("Failback", "step 1", "set_global_weights", stall="global", stall_after="probe_regions"),
    # The 3rd probe: 2 over the 1 s stabilization window, then step 1's check.
    KillPoint(
        "Failback",
        "step 2",
        "set_global_weights",
        nth=2,
        stall="global",
        stall_after="probe_regions",
        stall_after_nth=3,
    ),
    # Scale-back reads each region's capacity (us-west-1, then us-east-1) from its API server: stall
    # us-east-1's once the last step's weights are being set (that step's check probes us-west-1 only).
    KillPoint(
        "Failback",
        "scale back",
        "get_capacity",
        nth=2,
        stall="kube:us-east-1",
        stall_after="set_global_weights",
        stall_after_nth=2,
    ),
    KillPoint("Upgrade", "backup", "create_backup"),
    KillPoint("Upgrade", "deploy canary", "wait_rollout"),
    KillPoint("Upgrade", "warm-up", "warm_up"),
    KillPoint(
        "Upgrade", "weight step", "set_track_weights", stall="gateway:us-west-1", stall_after="warm_up"
    ),
    KillPoint("Upgrade", "analysis", "analyze_tracks"),
    KillPoint("Upgrade", "promote", "wait_rollout", nth=2),
    # The track weights back to stable go to the gateway; removing the canary then needs the API
    # server at once. The gateway holds the weights while the API server is stopped.
    KillPoint(
        "Upgrade",
        "promote: remove canary",
        "remove_track",
        stall="kube:us-west-1",
        stall_after="set_stable_release",
        gate="gateway:us-west-1",
        gate_activity="set_track_weights",
        gate_nth=2,
    ),
    # The preview analysis sends its requests to the replicas directly, not through the gateway.
    KillPoint(
        "Upgrade (blue-green)",
        "switch to green",
        "set_track_weights",
        stall="gateway:us-west-1",
        stall_after="analyze_tracks",
    ),
    KillPoint(
        "Upgrade (bad release)",
        "rollback",
        "set_track_weights",
        nth=2,
        stall="gateway:us-west-1",
        stall_after="analyze_tracks",
    ),
    KillPoint("Migration", "backup", "create_backup"),
    KillPoint("Migration", "restore", "restore_backup"),
    KillPoint("Migration", "ready", "wait_rollout"),
    KillPoint("Migration", "warm-up", "warm_up"),
    KillPoint("Migration", "step 50 % analysis", "analyze_tracks"),
    KillPoint(
        "Migration",
        "step 100 % weights",
        "set_global_weights",
        nth=2,
        stall="global",
        stall_after="analyze_tracks",
    ),
    # The last analysis lists us-west-1's replicas from its API server, then only sends them requests:
    # stall the API server once it heartbeats, and the decommission's scale-to-zero hangs on it.
    KillPoint(
        "Migration (decommission)",
        "decommission",
        "scale_deployment",
        nth=2,
        stall="kube:us-west-1",
        stall_after="analyze_tracks",
        stall_after_nth=2,
        stall_after_beat=True,
    ),
    KillPoint("ChaosDrill", "before the fault (preflight)", "probe_regions", stall="gateway:us-west-1"),
    KillPoint(
        "ChaosDrill (killed mid-fault)",
        "during the fault",
        "drill_run_experiment",
        kill_when="fault injected",
    ),
    KillPoint(
        "ChaosDrill (killed mid-rollback)",
        "during the rollback",
        "drill_run_experiment",
        kill_when="rollback running",
    ),
    KillPoint("ChaosDrill", "after the fault (failback)", "drill_observe", nth=2),
]

# What test_temporal_restart.py restarts, and where.
TEMPORAL_RESTARTS = [
    ("FleetMonitor", "watching a healthy fleet", "the Temporal dev server (restarted on the same db file)"),
    (
        "Failover started by the monitor",
        "under way (after preflight started)",
        "the Temporal dev server (restarted on the same db file)",
    ),
]

_STALLED = {
    "global": "the global HAProxy",
    "gateway": "the region gateway",
    "kube": "the region's API server",
}


def killed_what(kp: KillPoint) -> str:
    what = f"the worker holding `{kp.activity}`" + (f" (run {kp.nth})" if kp.nth > 1 else "")
    if kp.kill_when == "rollback running":
        what += " while its `chaos run` plays the rollbacks (paused before the clear), with it"
    elif kp.kill_when:
        what += f" once the {kp.kill_when.split()[0]} is in place, with its `chaos run`"
    if kp.stall and kp.stall.startswith("lock:"):
        what += (
            f", caught in flight by leaving the fleet lock held by a crashed {kp.stall[5:]} run, "
            "the lock's worker killed (Temporal holds its next task 10 s)"
        )
    elif kp.stall:
        kind, _, region = kp.stall.partition(":")
        what += f", caught in flight by stalling {_STALLED[kind]}" + (f" of {region}" if region else "")
    return what


def markdown_table() -> str:
    """The docs/tests.md table: every kill point and restart the suite runs; each row is one passing test."""
    rows = ["| operation | phase | killed what | resumed to the right end state |", "|---|---|---|---|"]
    rows += [f"| {kp.op} | {kp.phase} | {killed_what(kp)} | yes |" for kp in KILL_POINTS]
    rows += [f"| {op} | {phase} | {what} | yes |" for op, phase, what in TEMPORAL_RESTARTS]
    return "\n".join(rows)
