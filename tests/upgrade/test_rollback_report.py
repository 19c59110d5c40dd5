"""What a failed rollback reports, per region: `ended_on` and the CLI table (pure, no stack)."""

from __future__ import annotations

from rich.console import Console

from drctl.cli.upgrade import render
from drctl.config.schema import FleetConfig
from drctl.models.upgrade import Outcome, RegionWave, Release, UpgradeResult, upgrade_request
from workflows.upgrade_wave import ended_on

OLD, NEW = "vllm/vllm-openai:v1", "vllm/vllm-openai:v2"


def test_each_region_ends_on_what_the_rollback_really_left(fleet_config: FleetConfig) -> None:
    req = upgrade_request(fleet_config, "u1", NEW, regions=["us-west-1", "us-east-1"])
    before = {"us-west-1": Release(image=OLD), "us-east-1": Release(image=OLD)}
    stuck = "stable llm-stable may still run v2, not v1 (Forbidden: patch deployments)"
    waves = [
        RegionWave(region="us-west-1", outcome=Outcome.SUCCEEDED),
        # Promotion had started and putting stable back failed: stable is on the new image.
        RegionWave(
            region="us-east-1", outcome=Outcome.ROLLBACK_FAILED, left_behind=[stuck], stable_image=NEW
        ),
    ]
    releases = ended_on(req, waves, before)
    assert [(r.region, r.image, r.state, r.left_behind) for r in releases] == [
        ("us-west-1", NEW, "upgraded", []),
        ("us-east-1", NEW, "rollback-failed", [stuck]),
    ]
    # Without stable_image the rollback failed elsewhere (e.g. the canary): stable kept its old image.
    waves[1] = waves[1].model_copy(update={"stable_image": None})
    assert ended_on(req, waves, before)[1].image == OLD

    res = UpgradeResult(
        upgrade_id="u1",
        image=NEW,
        strategy=req.strategy,
        outcome=Outcome.ROLLBACK_FAILED,
        reason="us-east-1: analysis failed; rollback failed",
        failed_region="us-east-1",
        waves=waves,
        releases=releases,
    )
    console = Console(width=250, record=True)
    render(res, "http://ui/x", console)
    text = console.export_text()
    assert "upgrade: ROLLBACK_FAILED" in text
    assert f"{NEW} (rollback-failed)" in text
    assert any("left behind us-east-1" in line and stuck in line for line in text.splitlines())
