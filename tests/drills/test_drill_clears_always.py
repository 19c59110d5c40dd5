"""No fault outlives its drill: the ChaosDrill workflow clears its target after every experiment.

Issue 28's case, reproduced: a drill whose deadline arrives while a rollback pause is still running.
The activity sends `chaos run` SIGTERM at the deadline as the worker does; chaoslib interrupts the
pause and never calls `/faults/clear`, and the activity returns normally with the interrupted
journal. Before, the workflow cleared the region only when the activity failed, so the fault stayed.

Real parts: the ChaosDrill workflow on a Temporal dev server, the worker's experiment activity with
its real `chaos run` subprocess, the worker's clear activity, drctl's actions and probes, the Notify
workflow and its webhook activity. Stand-ins on loopback: the region admin API (stateful, records
every call: a replica kept down until a clear) and the global endpoint (completions with the
region header). The fleet's own reads (lock, probes, weights, report upload) are answered by
test activities under the product's names, so no dev stack is needed.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities import chaos as chaos_activities
from activities import notify as notify_activities
from drctl.chaos.validate import validate_experiment
from drctl.config.schema import FleetConfig, WebhookConfig, load_config
from drctl.models.activity_io import ProbeBatch, ProbeRequest, Weights
from drctl.models.drill import DrillInput, DrillReport, ReportKey, Verdict
from drctl.models.lock import LockGrant, LockRequest
from tests.support.config import fleet_config_data
from tests.support.http_stub import Reply, Request, StubServer
from tests.support.receiver import receiver, with_hooks
from workflows.drill import ChaosDrill
from workflows.notify import Notify

WEST = "us-west-1"


class AdminAPI:
    """The region admin API as the dev stack's answers it: a kill with stay_down holds the replicas
    (GET /faults lists them) until POST /faults/clear. `clear_works=False` is a clear that answers
    200 and changes nothing, as a broken agent would."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[str] = []
        self.held: list[dict[str, Any]] = []
        self.owners: set[str] = set()
        self.clear_works = True

    def handle(self, req: Request) -> Reply:
        path = req.path.removeprefix(f"/admin/{WEST}")
        with self.lock:
            self.calls.append(f"{req.method} {path}")
            if req.method == "POST" and path == "/faults/replicas":
                body = req.json() or {}
                self.owners.add(str(body.get("owner")))
                self.held = [
                    {"pod": f"{WEST}-stable-{i}", "track": "stable", "state": "killed", "stay_down": True}
                    for i in range(2)
                ]
                return Reply(200, {"affected": [r["pod"] for r in self.held]})
            if req.method == "POST" and path == "/faults/clear":
                if self.clear_works:
                    self.held, self.owners = [], set()
                return Reply(200, {"cleared": True})
            if req.method == "GET" and path == "/faults":
                state: dict[str, Any] = {"replicas": self.held, "gateway": None, "inference": {}}
                return Reply(200, {**state, "partitioned": [], "owners": sorted(self.owners)})
        if path.endswith("/v1/completions"):
            return Reply(200, {"choices": [{"text": "x"}]}, {"x-drctl-region": "us-east-1"})
        return Reply(404, {"error": path})


@pytest.fixture
def admin_api() -> Iterator[tuple[AdminAPI, str]]:
    api = AdminAPI()
    with StubServer(api.handle) as server:
        yield api, server.url


# --- the fleet's reads, answered for a healthy fleet (the drill's preflight) -----------------------


@activity.defn(name="acquire_fleet")
async def _acquire(_inp: LockRequest) -> LockGrant:
    return LockGrant(granted=True)


@activity.defn(name="probe_regions")
async def _probe(_inp: ProbeRequest) -> ProbeBatch:
    return ProbeBatch(probes=[])


@activity.defn(name="drill_store_report")
async def _store(report: DrillReport) -> ReportKey:
    return ReportKey(id=report.id)


def _experiment(pause_s: float) -> dict[str, Any]:
    exp = json.loads((Path(__file__).resolve().parents[2] / "experiments" / "region-outage.json").read_text())
    exp["steady-state-hypothesis"]["probes"][0]["provider"]["arguments"] = {"requests": 1, "timeout_s": 2}
    exp["extensions"][0]["expect_failover"] = False  # no monitor here: only the fault and its clean-up
    exp["method"] = exp["method"][:1]
    exp["rollbacks"][0]["pauses"] = {"before": pause_s}
    return exp


async def _drill(
    client: Client, tmp_path: Path, url: str, deadline_s: float, hook_url: str | None = None
) -> tuple[WorkflowHandle[Any, Any], FleetConfig]:
    data = fleet_config_data()
    for region in data["regions"]:
        region["devstack_admin_url"] = f"{url}/admin/{region['name']}"
    data["traffic"]["global_endpoint"] = url
    data["drills"] = {"allowed_targets": [WEST], "fault_injector": "devstack"}
    cfg_path = tmp_path / "fleet.yaml"
    cfg_path.write_text(yaml.safe_dump(data))
    cfg = load_config(cfg_path)
    if hook_url:
        cfg = with_hooks(cfg, WebhookConfig(name="ops", url=f"{hook_url}/hook", retry_for_s=30))
    # A 30 s pause fits the rollback budget (30 + 20 <= 60 - 10) of the fleet's 300 s drill; this drill
    # is started through Temporal with a shorter deadline, so SIGTERM comes while the pause runs.
    exp_path = tmp_path / "held-outage.json"
    exp_path.write_text(json.dumps(_experiment(30)))
    plan = validate_experiment(exp_path, cfg)
    inp = DrillInput.from_config(cfg, plan).model_copy(update={"timeout_s": deadline_s})
    queue = cfg.temporal.task_queue
    handle = await client.start_workflow(
        "ChaosDrill", inp, id=f"drill/test/{uuid.uuid4().hex[:8]}", task_queue=queue
    )
    return handle, cfg


def _worker(client: Client, cfg: FleetConfig) -> Worker:
    @activity.defn(name="get_global_weights")
    async def weights() -> Weights:
        return Weights(weights=cfg.weights)

    return Worker(
        client,
        task_queue=cfg.temporal.task_queue,
        activity_executor=ThreadPoolExecutor(4),  # the clear and the webhook are sync activities
        workflows=[ChaosDrill, Notify],
        activities=[
            _acquire,
            _probe,
            _store,
            weights,
            *chaos_activities.build(cfg),
            *notify_activities.build(cfg),
        ],
    )


async def _activity_results(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """`<activity>:<completed|failed|timed out>` for each activity of the drill, in order."""
    names: dict[int, str] = {}
    out: list[str] = []
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        for kind, attr in (
            ("completed", "activity_task_completed_event_attributes"),
            ("failed", "activity_task_failed_event_attributes"),
            ("timed out", "activity_task_timed_out_event_attributes"),
        ):
            if e.HasField(attr):
                out.append(f"{names[getattr(e, attr).scheduled_event_id]}:{kind}")
    return out


async def test_the_workflow_clears_a_fault_whose_rollback_the_deadline_cut_off(
    temporal_env: WorkflowEnvironment, admin_api: tuple[AdminAPI, str], tmp_path: Path
) -> None:
    api, url = admin_api
    handle, cfg = await _drill(temporal_env.client, tmp_path, url, deadline_s=15)
    async with _worker(temporal_env.client, cfg):
        with pytest.raises(WorkflowFailureError) as failed:  # a drill without a failover: not PASS
            await asyncio.wait_for(handle.result(), 150)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    report = DrillReport.model_validate(cause.details[0])
    # The experiment activity returned normally: the old workflow would have cleared nothing.
    results = await _activity_results(handle)
    assert "drill_run_experiment:completed" in results, results
    assert results.index("drill_clear_faults:completed") > results.index("drill_run_experiment:completed")
    assert report.fault_injected and report.journal is not None
    # The workflow's clear, then its read-back through the same admin API.
    calls = api.calls
    assert "POST /faults/replicas" in calls and "POST /faults/clear" in calls, calls
    clear = len(calls) - 1 - calls[::-1].index("POST /faults/clear")
    assert "GET /faults" in calls[clear:], calls
    if report.journal.status == "interrupted" and report.journal.rollbacks_ok == 0:
        # The case exactly: the experiment never cleared, so the only clear is the workflow's.
        assert calls.count("POST /faults/clear") == 1, calls
    assert api.held == [] and not any("still holds" in r for r in report.reasons), report.reasons


async def test_a_drill_whose_clean_up_failed_ends_failed_naming_what_is_left_and_notifies(
    temporal_env: WorkflowEnvironment, admin_api: tuple[AdminAPI, str], tmp_path: Path
) -> None:
    api, url = admin_api
    api.clear_works = False
    with receiver() as rec:
        handle, cfg = await _drill(temporal_env.client, tmp_path, url, deadline_s=15, hook_url=rec.url)
        async with _worker(temporal_env.client, cfg):
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(handle.result(), 150)
            posts = await rec.posted(1, what="the drill's verdict notification")
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable, cause
    report = DrillReport.model_validate(cause.details[0])
    assert report.verdict is Verdict.FAILED
    left = f"clean-up failed: {WEST} still holds replica {WEST}-stable-0 (killed, kept down)"
    assert any(r.startswith(left) for r in report.reasons), report.reasons
    assert left in cause.message
    assert any(left in json.dumps(p) for p in posts), posts
