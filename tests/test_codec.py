"""Secrets out of history: the AES-GCM payload codec, the codec server, and Temporal auth options.

The end-to-end test plants secrets the way a user would (`drctl upgrade --env HF_TOKEN=...`, an
experiment configuration value, an API token in it) against a real Temporal dev server, reads the
raw history with `temporal workflow show -o json`, and looks for them in the text and in every
base64 payload in it. The same check on a workflow started without the codec finds the secret, so
the check itself can fail.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from temporalio.api.common.v1 import Payload

from drctl.client.codec import AesGcmCodec, CodecKeyError, parse_keys
from drctl.client.connection import TemporalConfigError, connect_options
from drctl.config.schema import load_config
from tests.support.cli import drctl, run_cli
from tests.support.config import fleet_config_data, short_tmp_dir
from tests.support.ports import free_port, listening
from tests.support.temporal import dev_server_command
from tests.support.wait import wait_until

BIN = Path(sys.executable).parent
OUTAGE = json.loads((Path(__file__).resolve().parents[1] / "experiments" / "region-outage.json").read_text())
K1, K2 = base64.b64encode(b"1" * 32).decode(), base64.b64encode(b"2" * 32).decode()
HF_TOKEN = "hf_plantedSecretValue0042"
EXP_SECRET = "planted-experiment-value-77"
API_TOKEN = "planted-api-token-9931"


def test_rotation_decrypts_with_any_key_and_encrypts_with_the_first() -> None:
    old = AesGcmCodec(parse_keys(f"k1={K1}", "test"), "default")
    new = AesGcmCodec(parse_keys(f"k2={K2},k1={K1}", "test"), "default")
    p = Payload(metadata={"encoding": b"json/plain"}, data=b'"secret"')
    sealed = old.encrypt(p)
    assert b"secret" not in sealed.SerializeToString() and sealed.metadata["encryption-key-id"] == b"k1"
    assert new.decrypt(sealed) == p
    assert new.encrypt(p).metadata["encryption-key-id"] == b"k2"
    with pytest.raises(CodecKeyError, match="'k2', which is not among"):
        old.decrypt(new.encrypt(p))
    # The key id is authenticated: relabelling a ciphertext does not decrypt under another key.
    relabelled = Payload(metadata={**sealed.metadata, "encryption-key-id": b"k2"}, data=sealed.data)
    with pytest.raises(Exception):  # noqa: B017 - cryptography's InvalidTag
        new.decrypt(relabelled)
    # Payloads written before the codec was on stay readable only in a migration window.
    migrating = AesGcmCodec(parse_keys(f"k2={K2},k1={K1}", "test"), "default", allow_plaintext=True)
    assert migrating.decrypt(p) == p


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "no keys"),
        ("k1", "id=base64key"),
        ("k1=???", "not valid base64"),
        (f"k1={base64.b64encode(b'short').decode()}", "needs 32"),
        (f"k1={K1},k1={K2}", "appears twice"),
    ],
)
def test_bad_keys_are_named(text: str, words: str) -> None:
    with pytest.raises(CodecKeyError, match=words):
        parse_keys(text, "DRCTL_CODEC_KEYS")


def _cfg_file(directory: Path, temporal: dict[str, Any], **extra: Any) -> Path:
    data = fleet_config_data()
    data["temporal"].update(temporal)
    data.update(extra)
    path = directory / f"fleet-{len(list(directory.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_api_key_and_custom_ca_work_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    path = _cfg_file(
        tmp_path,
        {
            "api_key_env": "DRCTL_TEST_API_KEY",
            "tls": {"server_root_ca_cert_path": str(ca), "domain": "t.example"},
        },
    )
    monkeypatch.setenv("DRCTL_TEST_API_KEY", "key-123")
    opts = connect_options(load_config(path))
    assert opts["api_key"] == "key-123"
    assert opts["tls"].server_root_ca_cert == ca.read_bytes() and opts["tls"].domain == "t.example"
    assert opts["tls"].client_cert is None
    monkeypatch.setenv("DRCTL_TEST_API_KEY", " ")
    with pytest.raises(TemporalConfigError, match="DRCTL_TEST_API_KEY is unset or empty"):
        connect_options(load_config(path))
    # The CLI says so with exit 2, before any connection is tried.
    code, _, err = run_cli(
        ["upgrade", "--image", "vllm/vllm-openai:v0.6.4", "--no-wait", "--yes", "-c", str(path)]
    )
    assert code == 2 and "DRCTL_TEST_API_KEY is unset or empty" in err, err
    monkeypatch.delenv("DRCTL_TEST_API_KEY")
    code, _, err = run_cli(
        ["upgrade", "--image", "vllm/vllm-openai:v0.6.4", "--no-wait", "--yes", "-c", str(path)]
    )
    assert code == 2 and "DRCTL_TEST_API_KEY is unset or empty" in err, err


@pytest.fixture(scope="module")
def temporal_dev() -> Iterator[str]:
    """A Temporal dev server of this module's own (in memory), so its histories hold only our workflows."""
    port, ui = free_port(), free_port()
    log = short_tmp_dir("drctl-codec-") / "temporal.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            dev_server_command(port, ui),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: listening(port), timeout_s=60, what="temporal dev server up")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(20)


def _raw_history(address: str, wid: str) -> str:
    proc = subprocess.run(
        [str(BIN / "temporal"), "workflow", "show", "-w", wid, "-o", "json", "--address", address],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _payloads(node: Any, where: str = "") -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if "data" in node and "metadata" in node:
            yield {**node, "where": where}
        for k, v in node.items():
            yield from _payloads(v, f"{where}.{k}")
    elif isinstance(node, list):
        for v in node:
            yield from _payloads(v, where)


def _found(raw: str, secret: str) -> bool:
    """The secret in the history text, or inside any payload as stored (base64 of its bytes)."""
    if secret in raw:
        return True
    return any(secret.encode() in base64.b64decode(p.get("data") or "") for p in _payloads(json.loads(raw)))


def _upgrade_no_wait(path: Path, env: dict[str, str]) -> str:
    """`drctl upgrade --no-wait` with HF_TOKEN in its environment: the upgrade's workflow id."""
    up = drctl(
        "upgrade", "--image", "vllm/vllm-openai:v0.6.4", "--env", f"HF_TOKEN={HF_TOKEN}", "--no-wait", "--yes",
        "-o", "json", "-c", str(path), env=env,
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    return str(json.loads(up.stdout)["workflow_id"])


def _terminate(workflow_id: str, path: Path) -> None:
    """End a workflow no worker will run, so the fleet is free for the next (its history stays)."""
    address = load_config(path).temporal.address
    cmd = [str(BIN / "temporal"), "workflow", "terminate", "-w", workflow_id, "--address", address]
    subprocess.run(cmd, capture_output=True, timeout=60, check=True)


def _start_workflows(path: Path, directory: Path, env: dict[str, str]) -> list[str]:
    """An upgrade with HF_TOKEN and a drill whose experiment holds a value and an API token."""
    upgrade_id = _upgrade_no_wait(path, env)
    # No worker runs here: end the upgrade so the fleet is free for the drill (its history stays).
    _terminate(upgrade_id, path)
    exp = copy.deepcopy(OUTAGE)
    exp["configuration"].update(note=EXP_SECRET, probe_api_token=API_TOKEN)
    exp_path = directory / f"outage-{time.monotonic_ns()}.json"
    exp_path.write_text(json.dumps(exp))
    drill = drctl("drill", "run", str(exp_path), "--no-wait", "--yes", "-c", str(path), env=env)
    assert drill.returncode == 0, drill.stderr
    drill_id = next(t for t in drill.stderr.split() if t.startswith("drill/"))
    _terminate(drill_id, path)
    return [upgrade_id, drill_id]


def test_planted_secrets_are_absent_from_raw_history_and_readable_through_the_codec_server(
    temporal_dev: str, tmp_path: Path
) -> None:
    env = {"DRCTL_CODEC_KEYS": f"k2={K2},k1={K1}", "DRCTL_CODEC_TOKEN": "ui-token-1"}
    drills = {"allowed_targets": ["us-west-1", "us-east-1"], "fault_injector": "devstack"}
    plain = _cfg_file(tmp_path, {"address": temporal_dev}, drills=drills)
    sealed = _cfg_file(
        tmp_path, {"address": temporal_dev, "codec": {"keys_env": "DRCTL_CODEC_KEYS"}}, drills=drills
    )

    # Without the codec the check finds every planted secret: it is a check that can fail.
    up_raw, drill_raw = (_raw_history(temporal_dev, w) for w in _start_workflows(plain, tmp_path, env))
    assert _found(up_raw, HF_TOKEN) and _found(drill_raw, EXP_SECRET) and _found(drill_raw, API_TOKEN)

    wids = _start_workflows(sealed, tmp_path, env)
    assert len(wids) == 2, wids
    histories = {w: _raw_history(temporal_dev, w) for w in wids}
    for wid, raw in histories.items():
        for secret in (HF_TOKEN, EXP_SECRET, API_TOKEN):
            assert not _found(raw, secret), f"{secret} readable in the raw history of {wid}"
        assert "binary/encrypted" in {
            base64.b64decode(p["metadata"].get("encoding", "")).decode() for p in _payloads(json.loads(raw))
        }

    port = free_port()
    ui = load_config(sealed).temporal.ui_url
    server = subprocess.Popen(
        [
            str(BIN / "drctl"),
            "codec-server",
            "-c",
            str(sealed),
            "--port",
            str(port),
            "--token-env",
            "DRCTL_CODEC_TOKEN",
        ],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: listening(port), timeout_s=60, what="codec server up")
        url = f"http://127.0.0.1:{port}/decode"
        pre = httpx.options(
            url,
            headers={
                "Origin": ui,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-namespace",
            },
            timeout=10,
        )
        assert pre.status_code == 200 and pre.headers["Access-Control-Allow-Origin"] == ui
        assert "X-Namespace" in pre.headers["Access-Control-Allow-Headers"]
        other = httpx.options(url, headers={"Origin": "http://evil.example"}, timeout=10)
        assert "Access-Control-Allow-Origin" not in other.headers
        payloads = [
            {k: v for k, v in p.items() if k != "where"}
            for raw in histories.values()
            for p in _payloads(json.loads(raw))
        ]
        body = {"payloads": payloads}
        denied = httpx.post(url, json=body, headers={"Origin": ui, "X-Namespace": "default"}, timeout=10)
        assert denied.status_code == 401
        ok = httpx.post(
            url,
            json=body,
            timeout=10,
            headers={"Origin": ui, "X-Namespace": "default", "Authorization": "Bearer ui-token-1"},
        )
        assert ok.status_code == 200, ok.text
        assert ok.headers["Access-Control-Allow-Origin"] == ui
        decoded = json.dumps(
            {
                "payloads": [
                    base64.b64decode(p.get("data") or "").decode(errors="replace")
                    for p in ok.json()["payloads"]
                ]
            }
        )
        assert all(s in decoded for s in (HF_TOKEN, EXP_SECRET, API_TOKEN))
    finally:
        server.terminate()
        server.wait(20)


@contextlib.contextmanager
def _worker_on(temporal: str, cfg_path: Path, env: dict[str, str], wid: str) -> Iterator[None]:
    """A `drctl worker` subprocess for the test's body; the workflow is terminated after it."""
    worker = subprocess.Popen(
        [str(BIN / "drctl"), "worker", "-c", str(cfg_path)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        worker.terminate()
        worker.wait(60)
        subprocess.run(
            [str(BIN / "temporal"), "workflow", "terminate", "-w", wid, "--address", temporal],
            capture_output=True,
            timeout=60,
        )


def test_a_worker_with_the_codec_runs_encrypted_workflows(temporal_dev: str, tmp_path: Path) -> None:
    """The worker decrypts the input, runs the workflow code and encrypts what it records."""
    env = {"DRCTL_CODEC_KEYS": f"k1={K1}"}
    cfg_path = _cfg_file(
        tmp_path,
        {
            "address": temporal_dev,
            "codec": {"keys_env": "DRCTL_CODEC_KEYS"},
            "task_queue": f"codec-{time.monotonic_ns()}",
        },
    )
    wid = _upgrade_no_wait(cfg_path, env)
    with _worker_on(temporal_dev, cfg_path, env, wid):

        def scheduled() -> bool:
            events = json.loads(_raw_history(temporal_dev, wid))["events"]
            return any(e.get("eventType") == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED" for e in events)

        # An activity scheduled means the worker read the encrypted input and ran the workflow.
        wait_until(scheduled, timeout_s=90, what="the worker ran the encrypted workflow")
        raw = _raw_history(temporal_dev, wid)
        assert not _found(raw, HF_TOKEN)
        plain = {
            p["where"]
            for p in _payloads(json.loads(raw))
            if base64.b64decode(p["metadata"].get("encoding", "")) != b"binary/encrypted"
        }
        # Search attributes stay plain by design (the server indexes them): fleet, operation, phase,
        # region names; every other payload is ciphertext.
        assert plain and all(".searchAttributes.indexedFields.Drctl" in w for w in plain), plain


def _upgrade_without_keys(plain: Path) -> str:
    """An upgrade started by a client without the codec (its input is plaintext): its workflow id."""
    up = drctl(
        "upgrade", "--image", "vllm/vllm-openai:v0.6.4", "--no-wait", "--yes", "-o", "json", "-c", str(plain),
        env={},
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    return str(json.loads(up.stdout)["workflow_id"])


def test_a_worker_with_the_codec_fails_a_workflow_started_without_it(
    temporal_dev: str, tmp_path: Path
) -> None:
    """Started by a client without the keys, the input is plaintext: the worker fails the workflow
    (closed, Failed, non-retryable, naming the setting that allows it), not its task over and over,
    and nothing runs (no activity is scheduled)."""
    env = {"DRCTL_CODEC_KEYS": f"k1={K1}"}
    queue = f"codec-plain-{time.monotonic_ns()}"
    plain = _cfg_file(tmp_path, {"address": temporal_dev, "task_queue": queue})
    sealed = _cfg_file(
        tmp_path, {"address": temporal_dev, "codec": {"keys_env": "DRCTL_CODEC_KEYS"}, "task_queue": queue}
    )
    wid = _upgrade_without_keys(plain)
    with _worker_on(temporal_dev, sealed, env, wid):

        def failed() -> dict[str, Any] | None:
            events = json.loads(_raw_history(temporal_dev, wid))["events"]
            return next(
                (
                    e["workflowExecutionFailedEventAttributes"]
                    for e in events
                    if "workflowExecutionFailedEventAttributes" in e
                ),
                None,
            )

        closed = wait_until(
            failed, timeout_s=90, what="the worker failed the plaintext workflow", interval_s=0.5
        )
        events = json.loads(_raw_history(temporal_dev, wid))["events"]
        assert not any(e.get("eventType") == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED" for e in events)
        # One workflow task, failing the workflow: not a task failure retried.
        assert not any("workflowTaskFailedEventAttributes" in e for e in events), events
        failure = closed["failure"]
        assert failure["applicationFailureInfo"] == {"type": "PlaintextRefused", "nonRetryable": True}, (
            failure
        )
        assert "plaintext payload refused" in failure["message"]
        assert "temporal.codec.allow_plaintext" in failure["message"]
        assert K1 not in json.dumps(events)


def test_allow_plaintext_lets_a_worker_run_a_workflow_started_without_the_keys(
    temporal_dev: str, tmp_path: Path
) -> None:
    """The migration window: with temporal.codec.allow_plaintext the same workflow runs."""
    env = {"DRCTL_CODEC_KEYS": f"k1={K1}"}
    queue = f"codec-window-{time.monotonic_ns()}"
    plain = _cfg_file(tmp_path, {"address": temporal_dev, "task_queue": queue})
    window = _cfg_file(
        tmp_path,
        {
            "address": temporal_dev,
            "codec": {"keys_env": "DRCTL_CODEC_KEYS", "allow_plaintext": True},
            "task_queue": queue,
        },
    )
    wid = _upgrade_without_keys(plain)
    with _worker_on(temporal_dev, window, env, wid):

        def scheduled() -> bool:
            events = json.loads(_raw_history(temporal_dev, wid))["events"]
            return any(e.get("eventType") == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED" for e in events)

        wait_until(
            scheduled,
            timeout_s=90,
            what="the worker ran the plaintext workflow in the window",
            interval_s=0.5,
        )
