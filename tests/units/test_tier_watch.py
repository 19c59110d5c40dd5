"""The tier watch's pure parts: what counts as news to the monitor, and how it is worded
(drctl/models/tier_watch.py); Route 53's own judgement of a health check's checkers."""

from __future__ import annotations

from drctl.models.tier_watch import TierSeen, describe, differs
from drctl.providers.route53_health import judge_observations


def seen(
    weights: dict[str, int] | None = None, out: dict[str, str] | None = None, error: str | None = None
) -> TierSeen:
    return TierSeen(weights=weights, out=out or {}, error=error)


def test_the_first_reading_is_always_news() -> None:
    assert differs(None, seen({"a": 1}))


def test_weights_regions_out_and_readability_are_news_an_error_s_wording_is_not() -> None:
    base = seen({"a": 60, "b": 40})
    assert not differs(base, seen({"a": 60, "b": 40}))
    assert differs(base, seen({"a": 0, "b": 100}))
    assert differs(base, seen({"a": 60, "b": 40}, out={"a": "health checks failed"}))
    # Why a region is out may be reworded between reads: only which regions are out counts.
    assert not differs(seen({"a": 60}, out={"a": "x"}), seen({"a": 60}, out={"a": "y"}))
    assert differs(base, seen(error="timeout"))
    assert not differs(seen(error="timeout"), seen(error="connection refused"))
    assert differs(seen(error="timeout"), base)


def test_describe_names_each_change_once() -> None:
    before = seen({"us-west-1": 60, "us-east-1": 40})
    after = seen({"us-west-1": 0, "us-east-1": 100}, out={"us-west-1": "health checks failed"})
    assert describe(before, after) == [
        "weights in effect us-west-1 60/us-east-1 40 → us-west-1 0/us-east-1 100",
        "us-west-1 taken out of rotation by the data plane: health checks failed",
    ]
    assert describe(after, seen({"us-west-1": 0, "us-east-1": 100})) == [
        "us-west-1 back in rotation: the data plane's health checks pass"
    ]
    assert describe(before, seen(error="refused")) == ["the global tier cannot be read: refused"]
    assert describe(seen(error="refused"), before) == ["the global tier can be read again"]
    assert describe(before, before) == []


def _obs(*statuses: str) -> list[dict[str, object]]:
    return [
        {"Region": "us-east-1", "IPAddress": "192.0.2.1", "StatusReport": {"Status": s}} for s in statuses
    ]


def test_route53_judges_a_check_healthy_above_18_percent_of_checkers() -> None:
    ok = "Success: HTTP Status Code 200, OK"
    bad = "Failure: HTTP Status Code 503, Service Unavailable"
    # 2 of 10 = 20 % > 18 %: healthy; 1 of 10 = 10 %: unhealthy (Route 53 Developer Guide).
    healthy, _ = judge_observations(_obs(*[ok] * 2, *[bad] * 8))
    assert healthy
    healthy, why = judge_observations(_obs(ok, *[bad] * 9))
    assert not healthy
    assert why.startswith("1 of 10 checkers report healthy") and "503" in why
    assert judge_observations(_obs(*[bad] * 3))[0] is False
    assert judge_observations([]) == (True, "no checker has reported yet")
