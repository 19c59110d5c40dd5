"""An HTTP probe the validator approves must not take the worker anywhere else: a fleet endpoint that
answers 302 to a foreign host is not followed.

Chaos Toolkit's own http provider follows it (shown first, on the same two servers, so the check can
fail); what runs for a validated experiment is drctl's `probes.http_request`, run here through
chaoslib's own python provider as `chaos run` would run the canonical text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from chaoslib.provider.http import run_http_activity
from chaoslib.provider.python import run_python_activity

from drctl.chaos.validate import validate_experiment
from drctl.config.schema import FleetConfig, load_config
from tests.support.config import fleet_config_data, shipped_experiment
from tests.support.http_stub import Reply, Request, StubServer


@pytest.fixture
def servers() -> Iterator[tuple[StubServer, StubServer, list[str]]]:
    """(a fleet endpoint answering 302 to the foreign host, the foreign host, what it was asked)."""
    foreign_hits: list[str] = []

    def foreign(req: Request) -> Reply:
        foreign_hits.append(req.path)
        return Reply(200, {"stolen": True})

    with StubServer(foreign) as elsewhere:

        def fleet(req: Request) -> Reply:
            return Reply(
                302, None, headers={"Location": f"{elsewhere.url}/latest/meta-data"}, content_type=None
            )

        with StubServer(fleet) as endpoint:
            yield endpoint, elsewhere, foreign_hits


def _config(tmp_path: Path, global_endpoint: str) -> FleetConfig:
    data = fleet_config_data()
    data["traffic"]["global_endpoint"] = global_endpoint
    data["drills"] = {"allowed_targets": ["us-west-1", "us-east-1"], "fault_injector": "devstack"}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_config(path)


def _with_probe(tmp_path: Path, provider: dict[str, Any]) -> Path:
    exp = shipped_experiment()
    exp["steady-state-hypothesis"]["probes"].append(
        {"type": "probe", "name": "h", "provider": provider, "tolerance": 302}
    )
    path = tmp_path / "redirect.json"
    path.write_text(json.dumps(exp))
    return path


def test_chaoslibs_http_provider_follows_a_redirect(
    servers: tuple[StubServer, StubServer, list[str]],
) -> None:
    """The fact the rule rests on (chaoslib 1.44): no provider key turns redirects off."""
    endpoint, _, hits = servers
    answer = run_http_activity(
        {"provider": {"type": "http", "url": f"{endpoint.url}/health", "timeout": 5}}, {}, {}
    )
    assert answer["status"] == 200 and hits == ["/latest/meta-data"]


@pytest.mark.parametrize(
    "provider",
    [
        {"type": "http", "url": "${global_endpoint}/health", "timeout": 5},
        {
            "type": "python",
            "module": "drctl.chaos.probes",
            "func": "http_request",
            "arguments": {"url": "${global_endpoint}/health"},
        },
    ],
    ids=["http-provider", "drctl-http-probe"],
)
def test_what_runs_for_an_http_probe_never_follows_a_redirect(
    servers: tuple[StubServer, StubServer, list[str]], tmp_path: Path, provider: dict[str, Any]
) -> None:
    endpoint, _, hits = servers
    cfg = _config(tmp_path, endpoint.url)
    plan = validate_experiment(_with_probe(tmp_path, provider), cfg, "us-west-1")
    doc = json.loads(plan.text)
    (probe,) = [p for p in doc["steady-state-hypothesis"]["probes"] if p["name"] == "h"]
    # What runs is drctl's probe on the checked URL; no http provider is left for chaoslib to run.
    assert probe["provider"] == {
        "type": "python",
        "module": "drctl.chaos.probes",
        "func": "http_request",
        "arguments": {"url": f"{endpoint.url}/health", "method": "GET", "timeout": 5, "max_retries": 0}
        if provider["type"] == "http"
        else {"url": f"{endpoint.url}/health"},
    }
    assert '"type": "http"' not in plan.text
    answer = run_python_activity(probe, doc["configuration"], {})
    assert answer["status"] == 302 and answer["headers"]["location"].endswith("/latest/meta-data")
    assert hits == [], "the worker followed a redirect to a host the validator refuses"
