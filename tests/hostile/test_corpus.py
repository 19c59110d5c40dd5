"""The hostile corpus: every file in tests/hostile/ is refused before anything of it runs.

Each experiment goes through `drctl drill run` (in-process, not a dry run: a valid one would be
started) and through the worker's own check of the plan it is handed (ChaosActivities._prepare, the
last step before `chaos run`). Each config goes through `drctl config validate`, `drctl drill run`
and the loader the worker uses. Every refusal must be exit 2 (or ExperimentInvalid / ConfigError),
name a problem, print no traceback, cost under a second of CPU, and leave no trace: no marker file,
no request to the stand-in admin API (where every fault would land) or to anything outside the
fleet, no connection to Temporal. The first line of each file names its class (docs/security.md).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from activities.chaos import ChaosActivities
from drctl.chaos.boundary import digest
from drctl.chaos.validate import EXPERIMENT_LIMITS, ExperimentInvalid, validate_experiment
from drctl.config.safeload import DocumentError, load_yaml
from drctl.config.schema import ConfigError, load_config
from drctl.models.drill import ExperimentPlan, ExperimentRunInput
from tests.support.cli import run_cli
from tests.support.config import fleet_config_data, short_tmp_dir
from tests.support.trap import counting_handler

HERE = Path(__file__).parent
EXPERIMENTS = sorted((HERE / "experiments").glob("*.yaml"))
CONFIGS = sorted((HERE / "configs").glob("*.yaml"))
REPO = HERE.parents[1]
SECRET = "s3cr3t-HOSTILE"  # the credential the URL configs carry: never printed


# Counts every request: the admin API a fault would call, and the host an exfiltration aims at.
_Trap = counting_handler()


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    work = short_tmp_dir("drctl-hostile-")
    trap = ThreadingHTTPServer(("127.0.0.1", 0), _Trap)
    threading.Thread(target=trap.serve_forever, daemon=True).start()
    door = socket.create_server(("127.0.0.1", 0))  # Temporal: listened on, never accepted from
    trap_url = f"http://127.0.0.1:{trap.server_address[1]}"
    data = fleet_config_data()
    for region in data["regions"]:
        region["devstack_admin_url"] = trap_url
    data["temporal"]["address"] = f"127.0.0.1:{door.getsockname()[1]}"
    data["drills"] = {
        "allowed_targets": ["us-west-1", "us-east-1"],
        "fault_injector": "devstack",
        "allowed_env": ["DRCTL_HOSTILE_KNOB"],
    }
    cfg_path = work / "fleet.yaml"
    cfg_path.write_text(yaml.safe_dump(data))
    mods = work / "mods"
    mods.mkdir()
    marker = work / "ran"
    touch = f"Path({str(marker)!r}).touch()"
    evil = f"from pathlib import Path\n{touch}\ndef run(**kw):\n    {touch}\n"
    (mods / "hostile_evil.py").write_text(evil)
    glob = data["traffic"]["global_endpoint"].removeprefix("http://")
    fill = {
        b"@GLOBAL@": glob.encode(),
        b"@PORT@": glob.rsplit(":", 1)[1].encode(),
        b"@RECORDER_HOST@": trap_url.removeprefix("http://").encode(),
        b"@MARKER@": str(marker).encode(),
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(mods))
        mp.setenv("DRCTL_HOSTILE_KNOB", "us-west-1")
        yield {"work": work, "config": cfg_path, "cfg": load_config(cfg_path), "fill": fill, "marker": marker}
    assert _Trap.hits == 0, "a hostile experiment reached the admin API or a host outside the fleet"
    trap.shutdown()
    door.close()


def _placed(world: dict[str, Any], src: Path) -> Path:
    data = src.read_bytes()
    for key, value in world["fill"].items():
        data = data.replace(key, value)
    dst = world["work"] / "exp" / src.name
    dst.parent.mkdir(exist_ok=True)
    dst.write_bytes(data)
    return dst


def _no_trace(world: dict[str, Any]) -> None:
    assert not world["marker"].exists(), "a hostile experiment ran code"
    assert _Trap.hits == 0, "a hostile experiment sent a request"


def _worker_prepares(world: dict[str, Any], text: str, target: str = "us-west-1", path: str = "x") -> None:
    """What the worker does with a plan handed to it through Temporal, just before `chaos run`."""
    plan = ExperimentPlan(
        path=path,
        name=Path(path).stem,
        title="t",
        text=text,
        sha256=digest(text),
        target_region=target,
        expect_failover=True,
    )
    inp = ExperimentRunInput(plan=plan, workflow_id="drill/test/hostile", load_rps=1, timeout_s=5)
    ChaosActivities(world["cfg"])._prepare(inp)


def test_the_corpus_is_large_and_every_file_names_its_class() -> None:
    assert len(EXPERIMENTS) >= 60 and len(CONFIGS) >= 30
    for path in EXPERIMENTS + CONFIGS:
        assert path.read_bytes().startswith(b"# class: "), path.name


@pytest.mark.parametrize("src", EXPERIMENTS, ids=[p.stem for p in EXPERIMENTS])
def test_hostile_experiment_is_refused_by_cli_and_worker(src: Path, world: dict[str, Any]) -> None:
    path = _placed(world, src)
    cpu = time.process_time()
    with pytest.raises(ExperimentInvalid) as refused:
        validate_experiment(path, world["cfg"])
    assert time.process_time() - cpu < 1.0, "a refusal must be bounded in time"
    assert str(refused.value).startswith(str(path)) and len(str(refused.value)) > len(str(path)) + 5
    code, out, err = run_cli(["drill", "run", str(path), "-c", str(world["config"])])
    assert code == 2 and "invalid experiment" in err and "Traceback" not in err + out, (code, err)
    _no_trace(world)
    # The worker is handed a plan through Temporal, not a file: whatever the text, it judges it again.
    target = "us-west-1"
    try:
        doc = load_yaml(path.read_bytes(), EXPERIMENT_LIMITS)
        text = json.dumps(doc, allow_nan=False)
        declared = (doc.get("configuration") or {}).get("target_region") if isinstance(doc, dict) else None
        target = declared if isinstance(declared, str) else target
    except (DocumentError, TypeError, ValueError, AttributeError):
        text = path.read_bytes().decode(errors="replace")
    with pytest.raises(ExperimentInvalid):
        _worker_prepares(world, text, target, str(path))
    _no_trace(world)


@pytest.mark.parametrize("src", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_hostile_config_is_refused_everywhere(src: Path, world: dict[str, Any]) -> None:
    cpu = time.process_time()
    with pytest.raises(ConfigError) as refused:
        load_config(src)  # what the worker and every command load
    assert time.process_time() - cpu < 1.0, "a refusal must be bounded in time"
    assert refused.value.problems and SECRET not in str(refused.value)
    experiment = str(REPO / "experiments" / "region-outage.json")
    for argv in (["config", "validate", str(src)], ["drill", "run", experiment, "-c", str(src)]):
        code, out, err = run_cli(argv)
        assert code == 2 and "invalid config" in err, (argv, code, err)
        assert "Traceback" not in err + out and SECRET not in err + out, err


def test_the_worker_bounds_a_plan_text_like_a_file(world: dict[str, Any]) -> None:
    """A plan handed through Temporal directly: deep nesting and duplicate keys in its JSON."""
    hostile = (
        "[" * 100_000 + "]" * 100_000,
        '{"title": "a", "title": "b"}',
        '{"a": NaN}',
        '{"title": "\\ud800"}',  # an escape that decodes to a lone surrogate
        '{"configuration": {}, "tags": ["\ud800"]}',  # a lone surrogate in the str itself
    )
    for text in hostile:
        with pytest.raises(ExperimentInvalid, match="not canonical JSON"):
            _worker_prepares(world, text)
    _no_trace(world)


def test_oversized_inputs_are_refused_unread(world: dict[str, Any]) -> None:
    """Files too big to keep in the corpus: a 50 MB config and a 2 MB experiment."""
    big_cfg = world["work"] / "big.yaml"
    with big_cfg.open("w") as fh:
        fh.write(world["config"].read_text())
        for _ in range(50):
            fh.write("#" + "x" * (1 << 20) + "\n")
    code, _, err = run_cli(["config", "validate", str(big_cfg)])
    assert code == 2 and "larger than the 16,777,216-byte limit" in err, err
    big_exp = world["work"] / "big.json"
    big_exp.write_text(json.dumps({"title": "x" * (2 << 20)}))
    code, _, err = run_cli(["drill", "run", str(big_exp), "-c", str(world["config"])])
    assert code == 2 and f"larger than the {EXPERIMENT_LIMITS.max_bytes:,}-byte limit" in err, err
    _no_trace(world)


@pytest.mark.parametrize(
    "path, where",
    [
        (("title",), "at title"),
        (("steady-state-hypothesis", "probes", 0, "name"), "at steady-state-hypothesis.probes[0].name"),
        (("method", 0, "provider", "arguments", "\ud800"), "a key in method[0].provider.arguments"),
    ],
)
def test_a_lone_surrogate_in_a_json_experiment_is_refused_naming_where(
    path: tuple[Any, ...], where: str, world: dict[str, Any]
) -> None:
    """JSON writes "\\ud800" as an ASCII escape that json decodes to a str no encoder can print."""
    doc = json.loads((REPO / "experiments" / "region-outage.json").read_text())
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = "probe \udfff"
    exp = world["work"] / "surrogate.json"
    exp.write_text(json.dumps(doc))
    assert "\\ud" in exp.read_text()
    for verb in ("validate", "run"):
        code, out, err = run_cli(["drill", verb, str(exp), "-c", str(world["config"])])
        assert code == 2 and "Traceback" not in err + out, (code, err)
        assert "not UTF-8 text" in err and where in err, err
    _no_trace(world)


def test_a_long_json_list_counts_against_the_values_limit(world: dict[str, Any]) -> None:
    """120,000 list items fit in 256 KiB of JSON: each is a value, as each key of an object is."""
    doc = json.loads((REPO / "experiments" / "region-outage.json").read_text())
    doc["tags"] = [1] * 120_000
    exp = world["work"] / "long-list.json"
    exp.write_text(json.dumps(doc, separators=(",", ":")))
    assert exp.stat().st_size < EXPERIMENT_LIMITS.max_bytes
    cpu = time.process_time()
    code, out, err = run_cli(["drill", "run", str(exp), "-c", str(world["config"])])
    assert time.process_time() - cpu < 1.0, "a refusal must be bounded in time"
    assert code == 2 and "more than 50,000 values" in err and "Traceback" not in err + out, err
    with pytest.raises(ExperimentInvalid, match="more than 50,000 values"):
        _worker_prepares(world, exp.read_text())
    _no_trace(world)


def test_drill_validate_judges_as_the_worker_will(world: dict[str, Any]) -> None:
    code, out, err = run_cli(
        ["drill", "validate", str(REPO / "experiments" / "region-outage.json"), "-c", str(world["config"])]
    )
    assert code == 0 and "Drill plan" in out, err
    code, _, err = run_cli(
        ["drill", "validate", str(_placed(world, EXPERIMENTS[0])), "-c", str(world["config"])]
    )
    assert code == 2 and "invalid experiment" in err and "Traceback" not in err, err
    _no_trace(world)
