"""`drctl backup schedule` against the dev stack's clusters, whose Velero agent honours Schedules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drctl.config.schema import FleetConfig
from drctl.devstack.stack import StackInfo
from drctl.providers.velero import VeleroBackupProvider
from tests.support.cli import drctl
from tests.support.wait import wait_until
from tests.support.workers import background_workers

pytestmark = [pytest.mark.devstack]


def scheduled(cfg: FleetConfig, region: str, schedule: str) -> list[str]:
    # The region's own: backup sync also imports the other region's (same schedule name, shared bucket).
    return [
        b.name
        for b in VeleroBackupProvider(cfg, region).list_backups()
        if b.name.startswith(f"{schedule}-") and b.phase == "Completed" and b.origin_region == region
    ]


def test_schedule_create_list_delete_and_backup_age_in_status(
    dev_stack: StackInfo, fleet_config: FleetConfig, fleet_config_path: Path
) -> None:
    c = str(fleet_config_path)
    with background_workers(fleet_config):  # `schedule list` and `status` read through them
        _create_list_delete(fleet_config, c)


def _create_list_delete(fleet_config: FleetConfig, c: str) -> None:
    made = drctl("backup", "schedule", "create", "--every", "1h", "--ttl", "72h", "-c", c)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "every-1h created in us-west-1: @every 1h" in made.stdout and "us-east-1" in made.stdout
    try:

        def listed() -> list[dict]:
            p = drctl("backup", "schedule", "list", "-o", "json", "-c", c)
            rows = [s for s in json.loads(p.stdout) if s["name"] == "every-1h"]
            assert len(rows) == 2 and all(s["last_backup"] and s["phase"] == "Enabled" for s in rows), rows
            return rows

        rows = wait_until(listed, timeout_s=30, interval_s=0.5, what="both schedules took their first backup")
        assert {s["ttl"] for s in rows} == {"72h"}
        for r in fleet_config.region_names:
            assert len(wait_until(lambda r=r: scheduled(fleet_config, r, "every-1h"), timeout_s=30)) == 1
        table = drctl("backup", "schedule", "list", "-c", c)
        assert "every-1h" in table.stdout and "@every 1h" in table.stdout
        one = json.loads(
            drctl("backup", "schedule", "list", "--region", "us-east-1", "-o", "json", "-c", c).stdout
        )
        assert {s["region"] for s in one} == {"us-east-1"}, one

        st = json.loads(drctl("status", "-o", "json", "-c", c).stdout)
        ages = {b["region"]: b["age_s"] for b in st["last_backup"]}
        assert all(a is not None and 0 <= a < 120 for a in ages.values()), st["last_backup"]
        assert "last successful backup: us-west-1" in drctl("status", "-c", c).stdout

        again = drctl("backup", "schedule", "create", "--every", "1h", "--ttl", "72h", "-c", c)
        assert again.returncode == 2 and "already exists" in again.stderr
        # An hourly schedule is not due again: still one backup per region.
        assert len(scheduled(fleet_config, "us-west-1", "every-1h")) == 1

        fast = drctl(
            "backup",
            "schedule",
            "create",
            "--every",
            "2s",
            "--ttl",
            "1h",
            "--name",
            "fast",
            "--region",
            "us-west-1",
            "-c",
            c,
        )
        assert fast.returncode == 0, fast.stderr
        wait_until(
            lambda: len(scheduled(fleet_config, "us-west-1", "fast")) >= 2,
            timeout_s=30,
            interval_s=0.5,
            what="a 2 s schedule taking a second backup",
        )
        assert (
            drctl(
                "backup", "schedule", "delete", "fast", "--region", "us-west-1", "--yes", "-c", c
            ).returncode
            == 0
        )
    finally:
        gone = drctl("backup", "schedule", "delete", "every-1h", "--yes", "-c", c)
    assert gone.returncode == 0 and "deleted in us-east-1" in gone.stdout, gone.stderr
    assert json.loads(drctl("backup", "schedule", "list", "-o", "json", "-c", c).stdout) == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--every", "soon"], "--every 'soon'"),
        (["--every", "1h", "--cron", "0 * * * *"], "exactly one"),
        (["--every", "1h", "--ttl", "3 days"], "--ttl '3 days'"),
        (["--every", "1h", "--region", "mars-1"], "unknown region 'mars-1'"),
    ],
)
def test_bad_schedule_input_exits_2_and_creates_nothing(
    fleet_config_path: Path, args: list[str], words: str
) -> None:
    p = drctl("backup", "schedule", "create", *args, "-c", str(fleet_config_path))
    assert p.returncode == 2 and words in p.stderr, p.stderr
