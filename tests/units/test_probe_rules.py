"""drctl's chaos probes and actions as an experiment sees them: the defaults each signature promises
(the typed-argument check and the time budget read them), the request bound, and the HTTP probe that
stands in for chaoslib's (drctl/chaos/probes.py), over real HTTP to an in-process stand-in."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from drctl.chaos import actions, probes
from tests.support.standin import Reply, StandIn, serve


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    yield from serve()


@pytest.fixture(autouse=True)
def _fresh(standin: StandIn) -> None:
    standin.reset()


def _defaults(func: Any) -> dict[str, Any]:
    return {
        n: p.default
        for n, p in inspect.signature(func).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def test_each_functions_defaults_are_the_documented_ones() -> None:
    conf = {"configuration": None}
    assert _defaults(probes.global_success_ratio) == {"requests": 10, "timeout_s": 5.0, **conf}
    assert _defaults(probes.traffic_share) == {"requests": 20, "timeout_s": 5.0, "header": None, **conf}
    assert _defaults(probes.wait_for_traffic_moved) == {
        "within_s": 30.0,
        "consecutive": 10,
        "timeout_s": 2.0,
        "header": None,
        **conf,
    }
    assert _defaults(probes.wait_for_served) == {
        "within_s": 30.0,
        "consecutive": 10,
        "timeout_s": 2.0,
        **conf,
    }
    assert _defaults(probes.http_request) == {
        "method": "GET",
        "timeout": 5.0,
        "max_retries": 0,
        "headers": None,
        "params": None,
    }
    assert _defaults(probes.monitor_status) == conf and _defaults(probes.region_state) == conf
    assert _defaults(actions.kill_region_replicas) == {"track": "stable", **conf}
    assert _defaults(actions.kill_replicas) == {"count": 1, "track": "stable", **conf}
    assert _defaults(actions.degrade_region) == {
        "added_latency_ms": 0.0,
        "error_rate": 0.0,
        "track": "stable",
        **conf,
    }
    assert _defaults(actions.kill_gateway) == conf
    assert _defaults(actions.clear_faults) == {"track": "stable", **conf}
    assert probes.REGION_HEADER == "x-drctl-region"


def _completion(region: str) -> Reply:
    return Reply(200, {"choices": [{"text": "x"}]}, {"x-drctl-region": region})


def test_a_probe_sends_at_most_500_requests(standin: StandIn) -> None:
    anonymous = {"global_endpoint": standin.url, "model": "m"}
    standin.completions[:] = [_completion("us-east-1")]
    assert probes.traffic_share("us-east-1", requests=501, timeout_s=2, configuration=anonymous) == 1.0
    assert len(standin.calls) == 500


def test_http_request_sends_what_it_is_given_and_answers_as_chaoslib_does(standin: StandIn) -> None:
    standin.replies["GET /health?q=1"] = Reply(200, {"ok": True}, {"X-Seen": "1"})
    out = probes.http_request(f"{standin.url}/health", headers={"X-Drill": "a"}, params={"q": "1"})
    assert out["status"] == 200 and out["body"] == {"ok": True} and out["headers"]["x-seen"] == "1"
    method, path, _, headers = standin.calls[0]
    assert (method, path) == ("GET", "/health?q=1") and headers["x-drill"] == "a"
    # The method as given (the boundary allows only GET and HEAD; the stand-in answers POST too).
    standin.replies["POST /health"] = Reply(204)
    posted = probes.http_request(f"{standin.url}/health", method="POST")
    assert (posted["status"], posted["body"], standin.calls[-1][:2]) == (204, "", ("POST", "/health"))
    # JSON only when the server says so: anything else is text, as chaoslib reads it.
    standin.replies["GET /text"] = Reply(200, b'{"not": "parsed"}', content_type="text/plain")
    assert probes.http_request(f"{standin.url}/text")["body"] == '{"not": "parsed"}'
    standin.replies["GET /empty"] = Reply(200, None)
    assert probes.http_request(f"{standin.url}/empty")["body"] == ""


def test_http_request_answers_a_redirect_instead_of_following_it(standin: StandIn) -> None:
    standin.replies["GET /moved"] = Reply(302, None, {"Location": f"{standin.url}/elsewhere"})
    out = probes.http_request(f"{standin.url}/moved")
    assert out["status"] == 302 and out["headers"]["location"] == f"{standin.url}/elsewhere"
    assert [c[1] for c in standin.calls] == ["/moved"]


def test_http_request_times_out_as_told(standin: StandIn) -> None:
    standin.replies["GET /slow"] = Reply(200, {}, delay_s=1.0)
    with pytest.raises(Exception) as info:
        probes.http_request(f"{standin.url}/slow", timeout=0.2)
    assert "Timeout" in type(info.value).__name__
