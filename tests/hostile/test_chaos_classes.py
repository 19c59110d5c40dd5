"""The drill classes of the second hostile corpus (tests/hostile/chaos_cases.py), through both paths.

Each generated case goes through `drctl drill validate` and `drctl drill run --dry-run` (in-process)
and through the worker's own check before `chaos run` (ChaosActivities._prepare), and all must give
the case's verdict: exit 0 and a plan, or exit 2 naming the field; and the worker accepting, or
refusing with ExperimentInvalid.
An accepted case is handed to the worker twice: as the plan the CLI made, and as its own document
(what a drill started directly through Temporal could carry). Nothing reaches the admin API.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from activities.chaos import ChaosActivities
from drctl.chaos.boundary import digest
from drctl.chaos.validate import EXPERIMENT_LIMITS, ExperimentInvalid, validate_experiment
from drctl.config.safeload import load_yaml
from drctl.config.schema import load_config
from drctl.models.drill import ExperimentPlan, ExperimentRunInput
from tests.hostile.chaos_cases import GLOBAL, Case, cases
from tests.support.cli import run_cli
from tests.support.config import fleet_config_data, short_tmp_dir
from tests.support.trap import counting_handler

CASES = cases()


# Counts every request: the admin API a fault would call, and the host an exfiltration aims at.
_Trap = counting_handler()


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    work = short_tmp_dir("drctl-chaos-classes-")
    trap = ThreadingHTTPServer(("127.0.0.1", 0), _Trap)
    threading.Thread(target=trap.serve_forever, daemon=True).start()
    data = fleet_config_data()
    for region in data["regions"]:
        region["devstack_admin_url"] = f"http://127.0.0.1:{trap.server_address[1]}"
    data["drills"] = {"allowed_targets": ["us-west-1", "us-east-1"], "fault_injector": "devstack"}
    cfg_path = work / "fleet.yaml"
    cfg_path.write_text(yaml.safe_dump(data))
    cfg = load_config(cfg_path)
    assert cfg.drills.timeout_s == 300 and cfg.objectives.rto_target_s == 30  # the cases' budget figures
    glob = cfg.traffic.global_endpoint.removeprefix("http://")
    yield {"work": work, "config": cfg_path, "cfg": cfg, "global": glob}
    trap.shutdown()
    assert _Trap.hits == 0, "a drill case reached the admin API"
    shutil.rmtree(work, ignore_errors=True)


def _written(world: dict[str, Any], case: Case) -> Path:
    path = world["work"] / f"{case.name}{case.suffix}"
    path.write_text(case.text().replace(GLOBAL, world["global"]))
    return path


def _worker(world: dict[str, Any], text: str, target: str = "us-west-1") -> None:
    """The worker's own check of a plan handed to it through Temporal, just before `chaos run`."""
    plan = ExperimentPlan(
        path="x",
        name="x",
        title="t",
        text=text,
        sha256=digest(text),
        target_region=target,
        expect_failover=True,
    )
    inp = ExperimentRunInput(plan=plan, workflow_id="drill/test/classes", load_rps=1, timeout_s=5)
    workdir, _, _ = ChaosActivities(world["cfg"])._prepare(inp)
    shutil.rmtree(workdir, ignore_errors=True)


def test_the_corpus_covers_its_three_classes_on_both_sides_of_each_limit() -> None:
    by_class = {k: [c for c in CASES if c.klass == k] for k in (1, 4, 5)}
    assert all(len(v) >= 10 for v in by_class.values()), {k: len(v) for k, v in by_class.items()}
    assert all(any(c.expect is None for c in v) for v in by_class.values()), "each class has an accepted case"
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cli_and_worker_give_the_same_verdict(case: Case, world: dict[str, Any]) -> None:
    path = _written(world, case)
    code, out, err = run_cli(["drill", "validate", str(path), "-c", str(world["config"])])
    assert "Traceback" not in out + err
    dry = run_cli(["drill", "run", str(path), "--dry-run", "-c", str(world["config"])])
    assert dry[0] == code and (case.expect is not None or "nothing is injected" in dry[1]), dry
    data = path.read_bytes()
    doc = json.loads(data) if case.suffix == ".json" else load_yaml(data, EXPERIMENT_LIMITS)
    raw = json.dumps(doc, allow_nan=False)
    if case.expect is None:
        assert code == 0 and "Drill plan" in out, err
        _worker(world, validate_experiment(path, world["cfg"]).text)  # the plan the CLI makes
        _worker(world, raw)  # the document itself, handed over directly
        return
    assert code == 2 and "invalid experiment" in err, (code, out, err)
    assert case.expect in " ".join(err.split()), err
    with pytest.raises(ExperimentInvalid) as refused:
        _worker(world, raw)
    assert (case.worker_expect or case.expect) in str(refused.value), str(refused.value)
