"""The journal verdict, judged on journals written by the real `chaos run` against a real fleetsim."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from drctl.chaos.journal import judge
from tests.support.chaosrun import chaos_run, clear_action, experiment, fault_action
from tests.support.config import short_tmp_dir, write_fleet_config
from tests.support.ports import free_port
from tests.support.wait import wait_until


@pytest.fixture(scope="module")
def fleetsim() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "drctl.devstack.fleetsim", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{url}/health"), timeout_s=15, what="fleetsim up")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


@pytest.fixture(scope="module")
def journals(
    fleetsim: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[int, dict[str, Any]]]:
    """Every scenario's real journal, produced once (in parallel: each is a separate `chaos run`)."""
    url, dead = fleetsim, _dead_url()
    cfg_dir = short_tmp_dir()
    # A fleet whose allow-list excludes us-west-1: drctl's own action must refuse it.
    cfg_path = write_fleet_config(cfg_dir, {"drills": {"allowed_targets": ["us-east-1"]}})
    scenarios = {
        "pass": experiment(url, [fault_action(url, {"added_latency_ms": 1})], [clear_action(url)]),
        "action-fails": experiment(url, [fault_action(dead, {"down": True})], [clear_action(url)]),
        "deviated": experiment(url, [fault_action(url, {"down": True})], [clear_action(url)]),
        "rollback-fails": experiment(
            url,
            [fault_action(url, {"added_latency_ms": 1})],
            [clear_action(url), clear_action(dead, "clear-on-a-dead-host")],
        ),
        "target-refused": experiment(
            url,
            [
                {
                    "type": "action",
                    "name": "kill-west",
                    "provider": {
                        "type": "python",
                        "module": "drctl.chaos.actions",
                        "func": "kill_region_replicas",
                        "arguments": {"region": "us-west-1"},
                    },
                }
            ],
            [clear_action(url)],
            {"fleet_config": str(cfg_path)},
        ),
    }
    base = tmp_path_factory.mktemp("journals")
    # "deviated" and "pass" both touch the one fleetsim; the deviated fault would break the others'
    # hypotheses, so it runs alone after the parallel batch.
    parallel = {k: v for k, v in scenarios.items() if k != "deviated"}
    with ThreadPoolExecutor(len(parallel)) as pool:
        futures = {k: pool.submit(chaos_run, v, base / k) for k, v in parallel.items()}
        out = {k: f.result() for k, f in futures.items()}
    out["deviated"] = chaos_run(scenarios["deviated"], base / "deviated")
    httpx.post(f"{url}/admin/fault", json={"down": True}, timeout=3).raise_for_status()
    try:
        before = experiment(
            url, [fault_action(url, {"added_latency_ms": 1})], [clear_action(dead, "noop-rollback")]
        )
        out["broken-before"] = chaos_run(before, base / "broken-before")
    finally:
        httpx.delete(f"{url}/admin/fault", timeout=3).raise_for_status()
    return out


def test_clean_run_passes(journals: dict[str, tuple[int, dict[str, Any]]]) -> None:
    code, journal = journals["pass"]
    v = judge(journal)
    assert code == 0 and journal["status"] == "completed"
    assert v.ok, v.reasons
    assert v.fault_injected and v.fault_at is not None
    assert v.steady_state_before_met and v.steady_state_after_met
    assert v.rollbacks_ok == v.rollbacks_expected == 1


def test_broken_steady_state_before_is_aborted_although_chaos_says_completed(journals: dict) -> None:
    code, journal = journals["broken-before"]
    v = judge(journal)
    # Chaos Toolkit calls this run "completed"; nothing was injected, so the drill never started.
    assert journal["status"] == "completed"
    assert not v.fault_injected and v.aborted
    assert v.steady_state_before_met is False
    assert any("before the fault" in r and "global-endpoint-serves" in r for r in v.reasons), v.reasons


def test_failed_fault_action_is_not_a_pass(journals: dict) -> None:
    code, journal = journals["action-fails"]
    v = judge(journal)
    assert journal["status"] == "completed"  # the trap: a failed method action still "completes"
    assert not v.ok and not v.fault_injected and not v.aborted
    assert v.failed_actions == ["inject-fault"]
    assert any("action 'inject-fault' failed" in r for r in v.reasons), v.reasons


def test_deviation_after_the_fault_fails(journals: dict) -> None:
    _, journal = journals["deviated"]
    v = judge(journal)
    assert journal["deviated"] is True
    assert v.fault_injected and not v.ok
    assert any("after the fault" in r for r in v.reasons), v.reasons
    assert v.rollbacks_ok == 1  # the rollback brought the fleetsim back


def test_failed_rollback_fails(journals: dict) -> None:
    _, journal = journals["rollback-fails"]
    v = judge(journal)
    assert v.fault_injected and not v.ok
    assert v.rollbacks_failed == ["clear-on-a-dead-host"]
    assert any("rollback 'clear-on-a-dead-host'" in r for r in v.reasons), v.reasons


def test_drctl_action_refuses_a_target_outside_the_allow_list(journals: dict) -> None:
    _, journal = journals["target-refused"]
    v = judge(journal)
    assert not v.fault_injected and v.failed_actions == ["kill-west"]
    assert any("not an allowed drill target" in r for r in v.reasons), v.reasons


def test_empty_journal_is_not_a_pass() -> None:
    v = judge({"experiment": {"method": [{"type": "action", "name": "x"}]}, "status": None, "run": []})
    assert not v.ok and not v.fault_injected
