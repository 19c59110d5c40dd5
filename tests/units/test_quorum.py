"""The quorum vote: voters, a peer's view (staleness, missing, auth), strict majority, re-vote back-off."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml
from pydantic import ValidationError

from drctl.config.quorum import QuorumConfig
from drctl.models.activity_io import ProbeBatch
from drctl.models.fleet_spec import FleetSpec
from drctl.models.health import ProbeStatus, RegionProbe, TargetProbe
from drctl.models.quorum import MAIN, REVOTE_CAP_S, decide, view_of, voters
from tests.support.docs_text import blocks, page

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def batch(
    status: ProbeStatus,
    age_s: float = 0.5,
    region: str = "w",
    gateway: ProbeStatus | None = None,
    probed_at: str | None = None,
) -> ProbeBatch:
    at = (NOW - timedelta(seconds=age_s)).isoformat() if probed_at is None else probed_at
    probe = RegionProbe(
        region=region,
        status=status,
        reason=f"{status.value.lower()} reason",
        gateway=TargetProbe(target="gateway", url="http://g", status=gateway or status),
        probed_at=at,
    )
    return ProbeBatch(probes=[probe])


def view(b: ProbeBatch, max_age_s: float = 5.0, fail_on_degraded: bool = True) -> str:
    return view_of(b, "w", NOW, max_age_s, fail_on_degraded)


def test_a_region_never_votes_on_itself_and_main_always_votes() -> None:
    assert voters(["w", "e", "c"], "w") == [MAIN, "e", "c"]
    assert voters(["w", "e"], "e") == [MAIN, "w"]


def test_a_fresh_probe_is_down_or_healthy_as_the_monitor_would_judge_it() -> None:
    assert view(batch(ProbeStatus.DOWN)) == "down: down reason"
    assert view(batch(ProbeStatus.HEALTHY)) == "healthy"
    # Degraded replicas behind a healthy gateway are not a reason to move traffic (probe_passes).
    assert view(batch(ProbeStatus.DEGRADED, gateway=ProbeStatus.HEALTHY)) == "healthy"
    assert view(batch(ProbeStatus.DEGRADED, gateway=ProbeStatus.DEGRADED)).startswith("down:")
    assert (
        view(batch(ProbeStatus.DEGRADED, gateway=ProbeStatus.DEGRADED), fail_on_degraded=False) == "healthy"
    )


@pytest.mark.parametrize(
    "b, why",
    [
        (batch(ProbeStatus.HEALTHY, age_s=5.5), "probe 5.5s old (max 5s)"),
        (batch(ProbeStatus.DOWN, age_s=30), "probe 30.0s old"),
        (batch(ProbeStatus.HEALTHY, age_s=-8), "probe -8.0s old"),  # a clock far ahead is not now either
        (batch(ProbeStatus.HEALTHY, probed_at=""), "the probe has no time"),
        (batch(ProbeStatus.HEALTHY, probed_at="2026-11-30T12:00:00"), "the probe has no time"),  # no zone
        (batch(ProbeStatus.AUTH), "refused drctl's token"),
        (batch(ProbeStatus.HEALTHY, region="e"), "no probe of the region"),
        (ProbeBatch(probes=[], unresolved={"w": "worker q has no region 'w'"}), "worker q has no region 'w'"),
    ],
)
def test_an_old_unanswerable_or_refused_view_is_missing_never_healthy(b: ProbeBatch, why: str) -> None:
    v = view(b)
    assert v.startswith("missing: ") and why in v, v


def test_down_needs_a_strict_majority_of_all_voters_missing_ones_included() -> None:
    two = decide({MAIN: "down: x", "e": "healthy"}, NOW, None, 2.0)
    assert (two.verdict, two.down, two.voters) == ("no_quorum", 1, 2)
    assert decide({MAIN: "down: x", "e": "missing: no worker"}, NOW, None, 2.0).verdict == "no_quorum"
    assert decide({MAIN: "down: x", "e": "down: y"}, NOW, None, 2.0).verdict == "confirmed"
    three = {MAIN: "down: x", "e": "down: y", "c": "missing: timeout"}
    assert decide(three, NOW, None, 2.0).verdict == "confirmed"  # 2 of 3
    assert decide({**three, "e": "missing: old"}, NOW, None, 2.0).verdict == "no_quorum"  # 1 of 3
    four = {MAIN: "down: x", "e": "down: y", "c": "healthy", "n": "missing: z"}
    assert decide(four, NOW, None, 2.0).verdict == "no_quorum"  # 2 of 4 is not more than half


def test_revotes_back_off_from_the_interval_doubling_to_the_cap_and_restart_after_a_confirmation() -> None:
    views = {MAIN: "down: x", "e": "healthy"}
    waits, prev = [], None
    for i in range(8):
        prev = decide(views, NOW + timedelta(seconds=i), prev, 5.0)
        waits.append(prev.backoff_s)
    assert waits == [5, 10, 20, 40, REVOTE_CAP_S, REVOTE_CAP_S, REVOTE_CAP_S, REVOTE_CAP_S]
    assert prev is not None and prev.retry_at == NOW + timedelta(seconds=7 + REVOTE_CAP_S)
    confirmed = decide({MAIN: "down: x", "e": "down: y"}, NOW, prev, 5.0)
    assert decide(views, NOW, confirmed, 5.0).backoff_s == 5
    # An interval above the cap is never shortened by it.
    assert decide(views, NOW, None, 90.0).backoff_s == 90


def test_quorum_config_defaults_and_bounds_and_old_specs_stay_single_vantage() -> None:
    q = QuorumConfig()
    assert (q.mode, q.vantage_timeout_s, q.max_age_s) == ("majority", 3.0, 5.0)
    with pytest.raises(ValidationError, match="mode"):
        QuorumConfig(mode="any")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="vantage_timeout_s"):
        QuorumConfig(vantage_timeout_s=0)
    # A spec recorded before the quorum existed has no such field: it keeps the one-vantage decision.
    assert "quorum" in FleetSpec.model_fields
    assert FleetSpec.model_fields["quorum"].get_default(call_default_factory=True).mode == "off"


def test_the_readme_documents_the_defaults() -> None:
    doc = page("docs/configuration.md")
    block = next(b for b in blocks(doc, "yaml") if "quorum:" in b)
    documented = yaml.safe_load(block)["health"]["quorum"]
    assert documented == QuorumConfig().model_dump()
    assert f"at most {REVOTE_CAP_S:g} s" in doc
