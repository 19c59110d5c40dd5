"""The operations the kill points interrupt: how each is set up, started and judged.

Every scenario starts from the baseline (`restore_baseline`: us-west-1 60 / us-east-1 40, 2 stable
replicas each, only the stable track) and states the end state a correct run leaves.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from temporalio.client import Client, WorkflowHandle

from drctl.client.operations import start_operation
from drctl.config.schema import TRACKS, FleetConfig
from drctl.models.drill import DrillReport, Verdict
from drctl.models.failover import FailbackInput, FailbackResult, FailoverResult
from drctl.models.fleet_spec import FleetSpec
from drctl.models.migration import MigrationResult, migration_request
from drctl.models.upgrade import Outcome, Strategy, UpgradeResult, upgrade_request
from drctl.providers.traffic_factory import global_traffic
from tests.crash.endstate import EndState
from tests.crash.harness import KillPoint, Scenario
from tests.crash.rollback import ROLLBACK_PAUSE_S
from tests.support.devstack import apps_api
from tests.support.drills import EXPERIMENTS, start_drill, watched
from tests.support.upgrade import start_migration, start_upgrade
from tests.support.workers import admin, start_failover
from workflows.failback import Failback

STABLE_ONLY = {t: 100 if t == "stable" else 0 for t in TRACKS}
# Short analysis windows: 8 samples judge a 60 % error rate. The suite judges resumption, not
# latency, and a TTFT ratio of 8 samples on a loaded 2-core machine is noise (a replacement worker
# starting up is enough to double a p99), so only a gross TTFT regression fails the analysis here.
FAST_LIMITS = {"min_samples": 8, "max_ttft_p50_ratio": 20.0, "max_ttft_p99_ratio": 20.0}


def tweaked(cfg: FleetConfig, kp: KillPoint) -> FleetConfig:
    """cfg with the kill point's overrides, e.g. {"failover": {"verify_requests": 50}}."""
    # "input" holds overrides of the workflow input itself, read by the scenario's start.
    update = {
        section: getattr(cfg, section).model_copy(update=fields)
        for section, fields in kp.tweak.items()
        if section != "input"
    }
    return cfg.model_copy(update=update)


def _scale_stable(cfg: FleetConfig, region: str, n: int) -> None:
    r = cfg.region(region)
    apps = apps_api(r.kube.api_url or "")
    name = cfg.workload.deployment_name("stable")
    # The node agent holds a Deployment at its HPA's minReplicas, as the HPA controller would.
    k8s.AutoscalingV2Api(apps.api_client).patch_namespaced_horizontal_pod_autoscaler(
        name, r.kube.namespace, {"spec": {"minReplicas": n}}
    )
    apps.patch_namespaced_deployment_scale(name, r.kube.namespace, {"spec": {"replicas": n}})


def _settled(cfg: FleetConfig, verdict: str, **differences: Any) -> EndState:
    """The end state `verdict` with the fleet as configured (weights, replicas, release, stable only),
    but for `differences`."""
    fleet: dict[str, Any] = {
        "weights": cfg.weights,
        "tracks": {r: STABLE_ONLY for r in cfg.region_names},
        "replicas": {r.name: r.replicas for r in cfg.regions},
        "releases": {r: cfg.workload.image for r in cfg.region_names},
    }
    return EndState(verdict=verdict, **{**fleet, **differences})


# --- Failover: us-west-1 60 / us-east-1 40 → all on us-east-1, pre-scaled to carry it ----------


def _failover(**mode: bool) -> Any:
    """Start a failover to us-east-1; `mode`: emergency=True (shift first, scale after) or force=True."""

    async def start(client: Client, cfg: FleetConfig, kp: KillPoint) -> WorkflowHandle[Any, Any]:
        spec = FleetSpec.from_config(tweaked(cfg, kp))
        return await start_failover(client, cfg, spec=spec, **mode)

    return start


def _failed_over(cfg: FleetConfig) -> EndState:
    # us-east-1's 2 replicas + us-west-1's 2 that move with its share.
    return _settled(
        cfg,
        "succeeded",
        weights={"us-west-1": 0, "us-east-1": 100},
        replicas={"us-west-1": 2, "us-east-1": 4},
    )


# Verification fails: us-east-1 answers every request with an error. Forced, so the preflight's
# probe does not refuse it first; us-west-1 stays healthy, so the compensation restores the weights.
def _break_target(cfg: FleetConfig) -> None:
    admin(cfg, "us-east-1", "/faults/inference", {"error_rate": 1.0})


def _mend_target(cfg: FleetConfig) -> None:
    admin(cfg, "us-east-1", "/faults/clear")


def _compensated(cfg: FleetConfig) -> EndState:
    # Weights back; us-east-1 keeps the replicas it was scaled to (compensation moves traffic only).
    return _settled(
        cfg,
        "failed",
        replicas={"us-west-1": 2, "us-east-1": 4},
        says="verification failed",
        fields={"compensated": "restored_weights"},
    )


# --- Failback: from the failed-over state back to the configured weights, in steps --------------


def _prepare_failback(cfg: FleetConfig) -> None:
    global_traffic(cfg).set_weights({"us-west-1": 0, "us-east-1": 100})
    _scale_stable(cfg, "us-east-1", 4)


async def _start_failback(client: Client, cfg: FleetConfig, kp: KillPoint) -> WorkflowHandle[Any, Any]:
    spec = FleetSpec.from_config(tweaked(cfg, kp))
    window = kp.tweak.get("input", {}).get("stabilization_window_s", 1.0)
    return await start_operation(
        client,
        cfg,
        Failback.run,
        FailbackInput(spec=spec, stabilization_window_s=window),
        operation="failback",
        workflow_id=f"failback/{cfg.name}",
        target="us-west-1",
    )


def _failed_back(cfg: FleetConfig) -> EndState:
    return _settled(cfg, "succeeded")


# --- Upgrade: a canary wave in us-west-1 only (us-east-1 stays as it was) ---------------------

NEW_IMAGE = "vllm/vllm-openai:v0.9.0-crash"


def _upgrade(bad: bool, strategy: Strategy = Strategy.CANARY) -> Any:
    async def start(client: Client, cfg: FleetConfig, kp: KillPoint) -> WorkflowHandle[Any, Any]:
        req = upgrade_request(
            tweaked(cfg, kp),
            uuid.uuid4().hex[:8],
            NEW_IMAGE,
            regions=["us-west-1"],
            steps_percent=[50],
            env={"FLEETSIM_ERROR_RATE": "0.6"} if bad else None,
            strategy=strategy,
        )
        req = req.model_copy(
            update={
                "step_pause_s": 1.0,
                "scale_down_delay_s": 1.0,
                "limits": req.limits.model_copy(update=FAST_LIMITS),
            }
        )
        return await start_upgrade(client, cfg, req)

    return start


def _upgraded(cfg: FleetConfig) -> EndState:
    return _settled(
        cfg, Outcome.SUCCEEDED.value, releases={"us-west-1": NEW_IMAGE, "us-east-1": cfg.workload.image}
    )


def _rolled_back(cfg: FleetConfig) -> EndState:
    return _settled(cfg, Outcome.ROLLED_BACK.value)


# --- Migration: us-west-1's workload and traffic move to us-east-1 in two steps ---------------


def _migration(decommission: bool) -> Any:
    async def start(client: Client, cfg: FleetConfig, kp: KillPoint) -> WorkflowHandle[Any, Any]:
        req = migration_request(
            tweaked(cfg, kp),
            uuid.uuid4().hex[:8],
            "us-west-1",
            "us-east-1",
            steps_percent=[50, 100],
            decommission_source=decommission,
        )
        req = req.model_copy(
            update={"step_pause_s": 1.0, "limits": req.limits.model_copy(update=FAST_LIMITS)}
        )
        return await start_migration(client, cfg, req)

    return start


def _migrated(decommission: bool) -> Callable[[FleetConfig], EndState]:
    def expect(cfg: FleetConfig) -> EndState:
        # The target carries its own 2 replicas plus the source's 2; `migrate --decommission` scales
        # the source to zero once all its traffic has moved.
        return _settled(
            cfg,
            Outcome.SUCCEEDED.value,
            weights={"us-west-1": 0, "us-east-1": 100},
            replicas={"us-west-1": 0 if decommission else 2, "us-east-1": 4},
            fields={"decommissioned": decommission},
        )

    return expect


# --- ChaosDrill: region-outage.json on us-west-1, with the monitor watching ---------------------


async def _start_drill(client: Client, cfg: FleetConfig, kp: KillPoint) -> WorkflowHandle[Any, Any]:
    await watched(client, cfg)  # the drill measures the monitor's failover: it must be watching
    return await start_drill(client, tweaked(cfg, kp), EXPERIMENTS / "region-outage.json")


async def _start_drill_paused_rollback(
    client: Client, cfg: FleetConfig, kp: KillPoint
) -> WorkflowHandle[Any, Any]:
    """The region outage whose rollback pauses before its clear, so a kill can land in the rollback."""
    await watched(client, cfg)
    exp = json.loads((EXPERIMENTS / "region-outage.json").read_text())
    exp["rollbacks"][0]["pauses"] = {"before": ROLLBACK_PAUSE_S}
    path = Path(tempfile.mkdtemp(prefix="drctl-crash-")) / "region-outage-paused-rollback.json"
    path.write_text(json.dumps(exp))
    return await start_drill(client, tweaked(cfg, kp), path)


def _drilled(verdict: str, says: str | None = None) -> Any:
    def expect(cfg: FleetConfig) -> EndState:
        # Failed over and back: configured weights, us-east-1 scaled back, no fault left. After a
        # drill that did not finish, the monitor's own failback brings the fleet there.
        return _settled(cfg, verdict, settle_s=90.0, says=says)

    return expect


SCENARIOS: dict[str, Scenario] = {
    "Failover": Scenario(start=_failover(), result_type=FailoverResult, expect=_failed_over),
    "Failover (emergency)": Scenario(
        start=_failover(emergency=True), result_type=FailoverResult, expect=_failed_over
    ),
    "Failover (verify fails)": Scenario(
        start=_failover(force=True),
        result_type=FailoverResult,
        expect=_compensated,
        prepare=_break_target,
        after_kill=_mend_target,
    ),
    "Failback": Scenario(
        start=_start_failback, result_type=FailbackResult, expect=_failed_back, prepare=_prepare_failback
    ),
    "Upgrade": Scenario(start=_upgrade(bad=False), result_type=UpgradeResult, expect=_upgraded),
    "Upgrade (bad release)": Scenario(
        start=_upgrade(bad=True), result_type=UpgradeResult, expect=_rolled_back
    ),
    "Upgrade (blue-green)": Scenario(
        start=_upgrade(bad=False, strategy=Strategy.BLUE_GREEN), result_type=UpgradeResult, expect=_upgraded
    ),
    "Migration": Scenario(
        start=_migration(decommission=False), result_type=MigrationResult, expect=_migrated(False)
    ),
    "Migration (decommission)": Scenario(
        start=_migration(decommission=True), result_type=MigrationResult, expect=_migrated(True)
    ),
    "ChaosDrill": Scenario(
        start=_start_drill, result_type=DrillReport, expect=_drilled(Verdict.PASS.value), timeout_s=240.0
    ),
    # Killed with the fault injected: the experiment is never retried (it would inject twice), so
    # the drill ends ABORTED (nothing was measured), and clears the fault itself.
    "ChaosDrill (killed mid-fault)": Scenario(
        start=_start_drill,
        result_type=DrillReport,
        timeout_s=240.0,
        expect=_drilled(Verdict.ABORTED.value, says="drill faults in us-west-1 cleared by the workflow"),
    ),
    # Killed (with its `chaos run`) while the rollback is paused before its clear: nothing of the
    # experiment undoes the fault, so the workflow's own clear must, and the region reads back clear.
    "ChaosDrill (killed mid-rollback)": Scenario(
        start=_start_drill_paused_rollback,
        result_type=DrillReport,
        timeout_s=300.0,
        expect=_drilled(Verdict.ABORTED.value, says="drill faults in us-west-1 cleared by the workflow"),
    ),
}
