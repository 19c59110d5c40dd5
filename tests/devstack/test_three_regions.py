"""The shipped three-region fleet (config/fleet.three-regions.yaml) on a dev stack of its own: `drctl
dev up` serves all three regions, a failover moves every region's share to the one it names, and a
failback returns 50/30/20 in steps. Then the monitor: a region dies and its share goes to both
survivors (the decision core's placement, issue 26), not whole to one, and both are scaled for
their part; cleared, it comes back to 50/30/20. The same file, moved onto free loopback ports."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml

from drctl.config.schema import load_config
from drctl.devstack import stack
from drctl.models.failover_plan import needed_replicas, receiver_part
from drctl.models.fleet_spec import FleetSpec
from drctl.providers.traffic_factory import global_traffic
from tests.support.cli import drctl
from tests.support.config import REPO
from tests.support.shipped import relocated
from tests.support.wait import until
from tests.support.workers import admin, replicas

SHIPPED = REPO / "config" / "fleet.three-regions.yaml"


def relocated_three_regions() -> Path:
    """The shipped three-region config on free ports, its state under a short /tmp dir."""
    data = yaml.safe_load(SHIPPED.read_text())
    return relocated(
        SHIPPED,
        {
            # Quick failback steps: the test shows the steps' weights, not a production window.
            "failback": {"stabilization_window_s": 1, "steps": 2, "step_interval_s": 1},
            # Probes every 3 s, not 10: the monitor's failovers and failbacks in a third of the time.
            "health": {**data.get("health", {}), "interval_s": 3},
            "worker": {**data.get("worker", {}), "graceful_shutdown_s": 2},
        },
    )


@pytest.mark.ownstack
async def test_the_three_region_fleet_fails_over_and_back_by_hand_and_by_the_monitor() -> None:
    path = relocated_three_regions()
    cfg = load_config(path)
    assert [(r.name, r.weight) for r in cfg.regions] == [
        ("us-west-1", 50),
        ("us-east-1", 30),
        ("eu-west-1", 20),
    ]
    try:
        up = await asyncio.to_thread(drctl, "dev", "up", "-c", str(path), timeout_s=300)
        assert up.returncode == 0, up.stdout + up.stderr
        tier = global_traffic(cfg)
        assert tier.get_weights() == {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}

        over = await asyncio.to_thread(
            drctl, "failover", "--to", "eu-west-1", "--yes", "-c", str(path), timeout_s=240
        )
        assert over.returncode == 0, over.stdout + over.stderr
        assert tier.get_weights() == {"us-west-1": 0, "us-east-1": 0, "eu-west-1": 100}

        back = await asyncio.to_thread(drctl, "failback", "--yes", "-c", str(path), timeout_s=240)
        assert back.returncode == 0, back.stdout + back.stderr
        assert tier.get_weights() == {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}

        # The monitor: us-east-1 dies; its 30 points go to both survivors, none to the dead region.
        mon = await asyncio.to_thread(drctl, "monitor", "start", "-c", str(path), timeout_s=60)
        assert mon.returncode == 0, mon.stdout + mon.stderr
        admin(cfg, "us-east-1", "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})
        await until(
            lambda: tier.get_weights()["us-east-1"] == 0,
            timeout_s=120,
            interval_s=0.5,
            what="us-east-1 drained",
        )
        after = tier.get_weights()
        assert sum(after.values()) == 100, after
        assert after["us-west-1"] > 50 and after["eu-west-1"] > 20, f"spread over both survivors: {after}"
        # Both receivers are scaled for their part of us-east-1's share (the emergency scales after the
        # shift): each keeps its 2 replicas and takes its part of the 2 that served us-east-1.
        configured = {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}
        fleet = FleetSpec.from_config(cfg)
        needed = {
            r: needed_replicas(fleet, configured, after, r, 2, part=receiver_part(configured, after, r))[0]
            for r in ("us-west-1", "eu-west-1")
        }
        assert min(needed.values()) > 2, needed
        await until(
            lambda: {r: replicas(cfg, r) for r in needed} == needed,
            timeout_s=60,
            interval_s=0.5,
            what=f"both receivers scaled to {needed}",
        )
        admin(cfg, "us-east-1", "/faults/clear")
        await until(
            lambda: tier.get_weights() == {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20},
            timeout_s=180,
            interval_s=0.5,
            what="the monitor's failback to 50/30/20",
        )

        # A cascade: us-west-1 dies, and once its failback has begun, eu-west-1 dies too. Every point
        # ends on us-east-1, the one region left, and stays off both dead regions.
        admin(cfg, "us-west-1", "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})
        await until(
            lambda: tier.get_weights()["us-west-1"] == 0,
            timeout_s=120,
            interval_s=0.5,
            what="us-west-1 drained",
        )
        spread = tier.get_weights()
        assert spread["us-east-1"] > 30 and spread["eu-west-1"] > 20, f"spread over both survivors: {spread}"
        admin(cfg, "us-west-1", "/faults/clear")
        await until(
            lambda: tier.get_weights()["us-west-1"] > 0,
            timeout_s=180,
            interval_s=0.2,
            what="us-west-1's failback",
        )
        admin(cfg, "eu-west-1", "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})
        await until(
            lambda: tier.get_weights()["eu-west-1"] == 0,
            timeout_s=120,
            interval_s=0.3,
            what="eu-west-1 drained",
        )
        for _ in range(20):  # held for 10 s: no failback step puts share back on eu-west-1
            assert tier.get_weights()["eu-west-1"] == 0, tier.get_weights()
            await asyncio.sleep(0.5)
        print(
            f"monitor failover spread {after}, receivers scaled to {needed}; then {spread}; "
            f"after the cascade {tier.get_weights()}"
        )
    finally:
        down = await asyncio.to_thread(drctl, "dev", "down", "-c", str(path), timeout_s=120)
        stack.down(cfg)
        shutil.rmtree(path.parent, ignore_errors=True)
        assert down.returncode == 0, down.stderr
