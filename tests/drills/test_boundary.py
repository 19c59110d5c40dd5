"""The drill boundary: a hostile experiment is refused with exit 2 before any of it runs.

Each case plants something that would leave a trace if it ran: a `touch` of a marker file, an
import of a module that writes a marker, or a request to a recorder standing outside the fleet.
`drill run` and `drill schedule` must both refuse it, and no trace may appear. The worker side
(the activity's own checks of what it is handed) is tested without the CLI at the end.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from activities.chaos import ChaosActivities
from drctl.chaos.boundary import canonical, digest
from drctl.chaos.validate import ExperimentInvalid, validate_experiment
from drctl.config.schema import load_config
from drctl.models.drill import ExperimentRunInput
from tests.support.admin_recorder import OUTAGE, Recorder
from tests.support.cli import DRCTL, run_cli
from tests.support.config import drill_config

EVIL_MODULE = "drctl_evil_probe"


def _process(marker: Path, name: str = "evil") -> dict[str, Any]:
    return {
        "type": "probe",
        "name": name,
        "provider": {"type": "process", "path": "touch", "arguments": str(marker)},
    }


def _python(module: str, func: str, name: str = "evil", **arguments: Any) -> dict[str, Any]:
    return {
        "type": "probe",
        "name": name,
        "provider": {"type": "python", "module": module, "func": func, "arguments": arguments},
    }


def _cases(marker: Path, recorder: str) -> dict[str, tuple[Any, str]]:
    """name → (mutation of the outage experiment, words the error must contain)."""
    hypo = lambda a: lambda e: e["steady-state-hypothesis"]["probes"].insert(0, a)  # noqa: E731
    evil_py = _python(EVIL_MODULE, "run")
    return {
        "process-in-hypothesis": (hypo(_process(marker)), "provider type 'process' is not allowed"),
        "process-in-method": (lambda e: e["method"].append(_process(marker)), "provider type 'process'"),
        "process-in-rollbacks": (
            lambda e: e["rollbacks"].append({**_process(marker), "type": "action"}),
            "provider type 'process'",
        ),
        "dynamic-configuration": (
            lambda e: e["configuration"].update(x={**_process(marker)}),
            "dynamic configuration of type 'probe'",
        ),
        "configuration-reads-secret-env": (
            lambda e: e["configuration"].update(aws={"type": "env", "key": "AWS_SECRET_ACCESS_KEY"}),
            "may not read environment variable",
        ),
        "configuration-reads-drctl-token": (
            lambda e: e["configuration"].update(api_token={"type": "env", "key": "DRCTL_API_TOKEN"}),
            "may not read environment variable",
        ),
        "configuration-renamed-env": (
            lambda e: e["configuration"].update(target_region={"type": "env", "key": "HOME"}),
            "may not read environment variable 'HOME'",
        ),
        "controls-experiment": (
            lambda e: e.update(
                controls=[{"name": "c", "provider": {"type": "python", "module": EVIL_MODULE}}]
            ),
            "controls: not allowed",
        ),
        "controls-activity": (
            lambda e: e["method"][0].update(
                controls=[{"name": "c", "provider": {"type": "python", "module": EVIL_MODULE}}]
            ),
            "controls: not allowed",
        ),
        "secrets": (
            lambda e: e.update(secrets={"k": {"t": {"type": "env", "key": "AWS_SECRET_ACCESS_KEY"}}}),
            "secrets: not allowed",
        ),
        "provider-in-extension": (
            lambda e: e["extensions"].append({"name": "other", "hook": _process(marker)}),
            "provider type 'process'",
        ),
        "foreign-python-in-hypothesis": (hypo(evil_py), f"python module '{EVIL_MODULE}' is not allowed"),
        "foreign-python-in-rollbacks": (
            lambda e: e["rollbacks"].append({**evil_py, "type": "action"}),
            "is not allowed",
        ),
        "imported-helper": (
            hypo(_python("drctl.chaos.probes", "fleet")),
            "drctl.chaos.probes.fleet is not one",
        ),
        "private-helper": (
            hypo(_python("drctl.chaos.actions", "_admin", region="us-west-1", path="/faults/clear")),
            "_admin is not one",
        ),
        "configuration-argument": (
            lambda e: e["method"][0]["provider"]["arguments"].update(
                configuration={"fleet_config": "/tmp/other.yaml"}
            ),
            "argument 'configuration' is reserved",
        ),
        "http-outside-fleet": (
            hypo(
                {"type": "probe", "name": "exfil", "provider": {"type": "http", "url": recorder + "/exfil"}}
            ),
            "is not the fleet's global endpoint",
        ),
        "http-process-in-config": (
            lambda e: e["configuration"].update(
                u={"type": "probe", "name": "u", "provider": {"type": "http", "url": recorder + "/cfg"}}
            ),
            "dynamic configuration",
        ),
    }


@pytest.fixture()
def hostile(tmp_path: Path, admin_recorder: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    marker = tmp_path / "ran"
    mod_dir = tmp_path / "mods"
    mod_dir.mkdir()
    (mod_dir / f"{EVIL_MODULE}.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).touch()\ndef run(**kw):\n    Path({str(marker)!r}).touch()\n"
    )
    monkeypatch.syspath_prepend(str(mod_dir))
    return {
        "marker": marker,
        "dir": tmp_path,
        "config": drill_config(tmp_path, admin_recorder, ["us-west-1", "us-east-1"]),
        "recorder": admin_recorder,
    }


def test_every_hostile_experiment_exits_2_from_run_and_schedule(hostile: dict[str, Any]) -> None:
    failures = []
    Recorder.hits.clear()
    for name, (mutate, expected) in _cases(hostile["marker"], hostile["recorder"]).items():
        exp = copy.deepcopy(OUTAGE)
        mutate(exp)
        path = hostile["dir"] / f"{name}.json"
        path.write_text(json.dumps(exp))
        for argv in (
            ["drill", "run", str(path)],
            ["drill", "schedule", "--cron", "0 3 * * MON", "-e", str(path)],
        ):
            code, _, err = run_cli([*argv, "-c", str(hostile["config"])])
            if code != 2 or expected not in err:
                failures.append(f"{name} {argv[1]}: exit {code}, stderr {err.strip()!r}")
    assert not failures, "\n".join(failures)
    assert not hostile["marker"].exists(), "a hostile provider ran"
    assert EVIL_MODULE not in sys.modules, "a hostile module was imported"
    assert Recorder.hits == [], f"a request left the fleet: {Recorder.hits}"


def test_the_real_binary_refuses_a_process_probe(hostile: dict[str, Any]) -> None:
    exp = copy.deepcopy(OUTAGE)
    exp["steady-state-hypothesis"]["probes"].insert(0, _process(hostile["marker"]))
    path = hostile["dir"] / "process.yaml"
    path.write_text(yaml.safe_dump(exp))
    proc = subprocess.run(
        [str(DRCTL), "drill", "run", str(path), "-c", str(hostile["config"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "provider type 'process' is not allowed" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not hostile["marker"].exists()


@pytest.mark.parametrize("stem", ["..hidden", "-rf", ".x"])
def test_experiment_names_that_could_leave_a_directory_are_refused(
    hostile: dict[str, Any], stem: str
) -> None:
    path = hostile["dir"] / f"{stem}.json"
    path.write_text(json.dumps(OUTAGE))
    with pytest.raises(ExperimentInvalid, match="is not allowed"):
        validate_experiment(path, load_config(hostile["config"]))


def _run_input(
    hostile: dict[str, Any], exp: dict[str, Any], **plan_update: Any
) -> tuple[ChaosActivities, ExperimentRunInput]:
    cfg = load_config(hostile["config"])
    path = hostile["dir"] / "outage.json"
    path.write_text(json.dumps(OUTAGE))
    plan = validate_experiment(path, cfg).model_copy(update=plan_update)
    return ChaosActivities(cfg), ExperimentRunInput(
        plan=plan, workflow_id="drill/test/x", load_rps=1, timeout_s=5
    )


def test_worker_refuses_a_plan_whose_text_was_swapped(hostile: dict[str, Any]) -> None:
    """Workflow input is not trusted: a hostile text with a matching hash is re-validated and refused."""
    evil = copy.deepcopy(OUTAGE)
    evil["method"].insert(0, _process(hostile["marker"]))
    text = canonical(evil, {"target_region": "us-west-1"})
    acts, inp = _run_input(hostile, evil, text=text)
    with pytest.raises(ExperimentInvalid, match="does not match its sha256"):
        acts._prepare(inp)
    acts, inp = _run_input(hostile, evil, text=text, sha256=digest(text))
    with pytest.raises(ExperimentInvalid, match="provider type 'process'"):
        acts._prepare(inp)
    assert not hostile["marker"].exists()


def test_worker_runs_exactly_the_validated_bytes_under_fixed_names(hostile: dict[str, Any]) -> None:
    acts, inp = _run_input(hostile, OUTAGE, name="../../../../tmp/escape", fmt="../x")
    workdir, run, sha = acts._prepare(inp)
    try:
        assert run.parent == workdir and run.name == "experiment.json"
        assert sorted(p.name for p in workdir.iterdir()) == [
            "experiment.json",
            "settings.yaml",
            "submitted.json",
        ]
        assert digest(run.read_text()) == sha
        conf = json.loads(run.read_text())["configuration"]
        # Resolved to plain values: nothing is read from the worker's environment at run time.
        assert all(not isinstance(v, dict) for v in conf.values())
        assert conf["drill_id"] == "drill/test/x"
        assert conf["fleet_config"] == str(Path(hostile["config"]).resolve())
    finally:
        import shutil

        shutil.rmtree(workdir)
