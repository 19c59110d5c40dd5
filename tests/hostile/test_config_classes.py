"""The config classes of the second hostile corpus, generated: each case a fleet config and its verdict.

Classes (issue 28): 3 bounded inputs (a FIFO, a device or a directory as the config, a FIFO as a
token file), 6 secret paths (secret_dirs, one secret per role, name patterns), 7 configs that point
two things at one (gateways, Kubernetes API and namespace, set identifiers, task queues, restore
namespaces, an RTO below detection), 8 legitimate configs once refused (a punycode gateway, a
config reached through a symlink). Each case changes one thing in one base fleet, written as
`config_<case>.yaml` at test time, and has its expected verdict: refused naming a field path,
valid, or valid with a warning at a field path.

Every case goes through `drctl config validate` and through the worker's own load (the files of
`drctl worker -c`, the loader, and check_fleets), and both must give the expected verdict.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.config.schema import ConfigError, load_config
from drctl.providers.auth import AuthConfigError, bearer_token
from drctl.worker.fleets import FleetsError, check_fleets, config_files
from tests.support.cli import run_cli
from tests.support.config import short_tmp_dir

_REGION = {"weight": 50, "kube": {"namespace": "inference"}}
BASE: dict[str, Any] = {
    "name": "hostile",
    "regions": [
        {**_REGION, "name": "us-west-1", "gateway_url": "http://127.0.0.1:18401"},
        {**_REGION, "name": "us-east-1", "gateway_url": "http://127.0.0.1:18402"},
    ],
    "traffic": {
        "global_endpoint": "http://127.0.0.1:18400",
        "global": {"kind": "haproxy", "runtime_socket": "/tmp/hostile-global.sock"},
        "regional": {"kind": "gateway-api"},
    },
    "temporal": {"address": "127.0.0.1:1"},
}
BASE["regions"][0]["kube"] = {"api_url": "http://127.0.0.1:18421", "namespace": "inference"}
BASE["regions"][1]["kube"] = {"api_url": "http://127.0.0.1:18422", "namespace": "inference"}


@dataclass(frozen=True)
class Case:
    name: str
    klass: str
    changes: tuple[tuple[str, Any], ...]
    refused_at: str | None = None  # the field path a refusal names; None: valid
    warned_at: str | None = None  # a valid config's warning

    def data(self) -> dict[str, Any]:
        data = copy.deepcopy(BASE)
        for path, value in self.changes:
            *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
            node: Any = data
            for p in parents:
                node = node.setdefault(p, {}) if isinstance(p, str) else node[p]
            node[last] = value
        return data

    def text(self) -> str:
        verdict = f"refused at {self.refused_at}" if self.refused_at else "valid"
        verdict += f", warning at {self.warned_at}" if self.warned_at else ""
        return f"# class: {self.klass}; expect: {verdict}\n" + yaml.safe_dump(
            self.data(), allow_unicode=False
        )


def _c(
    name: str, klass: str, refused_at: str | None, *changes: tuple[str, Any], warned_at: str | None = None
) -> Case:
    return Case(name, klass, changes, refused_at, warned_at)


GW0 = "http://127.0.0.1:18401"
PUNY = "https://xn--bcher-kva.example:8443"
CROSS, SECRET, NAMES, HOSTS = "cross-field", "secret-paths", "names", "hosts"
CASES = [
    # 7: two regions pointed at one thing
    _c("shared-gateway", CROSS, "regions[1].gateway_url", ("regions.1.gateway_url", GW0)),
    _c("shared-gateway-slash", CROSS, "regions[1].gateway_url", ("regions.1.gateway_url", GW0 + "/")),
    _c(
        "shared-gateway-case",
        CROSS,
        "regions[1].gateway_url",
        ("regions.1.gateway_url", "HTTP://127.0.0.1:18401"),
    ),
    _c(
        "shared-gateway-default-port",
        CROSS,
        "regions[1].gateway_url",
        ("regions.0.gateway_url", "http://gw.example"),
        ("regions.1.gateway_url", "http://gw.example:80/"),
    ),
    _c(
        "shared-gateway-punycode",
        CROSS,
        "regions[1].gateway_url",
        ("regions.0.gateway_url", PUNY),
        ("regions.1.gateway_url", PUNY + "/"),
    ),
    _c(
        "shared-gateway-ipv6-spelling",
        CROSS,
        "regions[1].gateway_url",
        ("regions.0.gateway_url", "http://[::1]:18401"),
        ("regions.1.gateway_url", "http://[0:0::1]:18401"),
    ),
    _c("shared-kube-api", CROSS, "regions[1].kube", ("regions.1.kube.api_url", "http://127.0.0.1:18421")),
    _c(
        "shared-kube-in-cluster",
        CROSS,
        "regions[1].kube",
        ("regions.0.kube", {"in_cluster": True}),
        ("regions.1.kube", {"in_cluster": True}),
    ),
    _c(
        "shared-kube-context",
        CROSS,
        "regions[1].kube",
        ("regions.0.kube", {"context": "prod"}),
        ("regions.1.kube", {"context": "prod"}),
    ),
    _c(
        "shared-set-identifier-default",
        CROSS,
        "regions[1].route53_set_identifier",
        ("regions.1.route53_set_identifier", "us-west-1"),
    ),
    _c(
        "shared-set-identifier",
        CROSS,
        "regions[1].route53_set_identifier",
        ("regions.0.route53_set_identifier", "blue"),
        ("regions.1.route53_set_identifier", "blue"),
    ),
    _c(
        "shared-task-queue",
        CROSS,
        "regions[1].task_queue",
        ("regions.0.task_queue", "q"),
        ("regions.1.task_queue", "q"),
    ),
    _c("region-queue-is-main", CROSS, "regions[0].task_queue", ("regions.0.task_queue", "drctl")),
    _c(
        "region-queue-default-clash",
        CROSS,
        "regions[1].task_queue",
        ("regions.1.task_queue", "drctl-us-west-1"),
    ),
    *[
        _c(
            f"restore-{ns}",
            CROSS,
            "backup.restore_namespaces[1]",
            ("backup.restore_namespaces", ["restored", ns]),
        )
        for ns in ("kube-system", "kube-public", "kube-node-lease", "velero", "drctl")
    ],
    _c(
        "restore-worker-namespace",
        CROSS,
        "backup.restore_namespaces[0]",
        ("worker.namespace", "ops"),
        ("backup.restore_namespaces", ["ops"]),
    ),
    _c(
        "workload-in-kube-system",
        CROSS,
        "regions[0].kube.namespace",
        ("regions.0.kube.namespace", "kube-system"),
    ),
    _c(
        "rto-below-detection",
        CROSS,
        None,
        ("objectives.rto_target_s", 5),
        warned_at="objectives.rto_target_s",
    ),
    # 6: secret paths and roles
    *[
        _c(f"secret-dirs-{tag}", SECRET, "secret_dirs[0]", ("secret_dirs", [d]))
        for tag, d in [
            ("root", "/"),
            ("dot", "."),
            ("relative", "secrets"),
            ("etc", "/etc"),
            ("etc-slash", "/etc/"),
            ("dotdot", "/usr/../etc"),
            ("var-run", "/var/run"),
            ("proc-self", "/proc/self"),
            ("dev-shm", "/dev/shm"),
            ("root-home", "/root"),
            ("home", "/home"),
            ("sys", "/sys/kernel"),
            ("lib64", "/lib64"),
        ]
    ],
    _c(
        "secret-env-token-and-codec",
        SECRET,
        "temporal.codec",
        ("workload.auth", {"token_env": "K"}),
        ("temporal.codec", {"keys_env": "K"}),
    ),
    _c(
        "secret-env-token-and-api-key",
        SECRET,
        "temporal.api_key_env",
        ("workload.auth", {"token_env": "K"}),
        ("temporal.api_key_env", "K"),
    ),
    _c(
        "secret-env-webhook-and-codec",
        SECRET,
        "notifications.webhooks[0].url_env",
        ("temporal.codec", {"keys_env": "K"}),
        ("notifications.webhooks", [{"name": "slack", "format": "slack", "url_env": "K"}]),
    ),
    _c(
        "secret-file-token-and-codec",
        SECRET,
        "temporal.codec",
        ("workload.auth", {"token_file": "shared-secret"}),
        ("temporal.codec", {"keys_file": "shared-secret"}),
    ),
    _c(
        "secret-env-s3-key-and-token",
        SECRET,
        "data.endpoints.us-west-1.secret_access_key_env",
        ("workload.auth", {"token_env": "K"}),
        ("data.endpoints", {"us-west-1": {"secret_access_key_env": "K"}}),
    ),
    _c(
        "allowed-env-holds-token",
        SECRET,
        "drills.allowed_env[0]",
        ("workload.auth", {"token_env": "VLLM_API_KEY"}),
        ("drills.allowed_env", ["VLLM_API_KEY"]),
    ),
    _c("token-file-root", SECRET, "(top level)", ("workload.auth", {"token_file": "/etc/shadow"})),
    # 6: name-like fields have patterns
    _c("token-env-lowercase", NAMES, "workload.auth.token_env", ("workload.auth", {"token_env": "vllm_key"})),
    _c("api-key-env-space", NAMES, "temporal.api_key_env", ("temporal.api_key_env", "A B")),
    _c("codec-env-digit", NAMES, "temporal.codec.keys_env", ("temporal.codec", {"keys_env": "1KEYS"})),
    _c("allowed-env-dash", NAMES, "drills.allowed_env[0]", ("drills.allowed_env", ["A-B"])),
    _c("http-host-shell", NAMES, "worker.http_host", ("worker.http_host", "localhost; rm -rf /")),
    _c("http-host-markup", NAMES, "worker.http_host", ("worker.http_host", "[/]")),
    _c("http-host-bracketed", NAMES, "worker.http_host", ("worker.http_host", "[::1]")),
    _c("http-host-hex", NAMES, "worker.http_host", ("worker.http_host", "0x7f.1")),
    _c(
        "kube-context-osc52",
        NAMES,
        "regions[0].kube.context",
        ("regions.0.kube", {"context": "\x1b]52;c;aGk=\x07"}),
    ),
    _c("kube-context-markup", NAMES, "regions[0].kube.context", ("regions.0.kube", {"context": "[/]x"})),
    _c("identity-bidi", NAMES, "temporal.identity", ("temporal.identity", "ops\u202etxt.exe")),
    _c("aws-region-text", NAMES, "aws.region", ("aws.region", "us east")),
    _c(
        "set-identifier-newline",
        NAMES,
        "regions[0].route53_set_identifier",
        ("regions.0.route53_set_identifier", "a\nb"),
    ),
    _c("tls-domain-text", NAMES, "temporal.tls.domain", ("temporal.tls", {"domain": "a b"})),
    _c(
        "allowed-target-escape",
        NAMES,
        "drills.allowed_targets[0]",
        ("drills.allowed_targets", ["us-west-1\x1b[2J"]),
    ),
    _c("history-bucket-text", NAMES, "drills.history_bucket", ("drills.history_bucket", "my bucket")),
    _c(
        "prometheus-selector-newline",
        NAMES,
        "health.passive.prometheus.selector",
        (
            "health.passive",
            {"source": "prometheus", "prometheus": {"url": "http://127.0.0.1:9090", "selector": 'job="a"\n'}},
        ),
    ),
    # 8: legitimate configs accepted
    _c("valid-punycode-gateway", HOSTS, None, ("regions.0.gateway_url", PUNY)),
    _c("valid-punycode-sigma", HOSTS, None, ("regions.0.gateway_url", "http://xn--nxasmq6b.com:8080")),
    _c(
        "valid-one-api-two-namespaces",
        CROSS,
        None,
        ("regions.1.kube", {"api_url": "http://127.0.0.1:18421", "namespace": "east"}),
    ),
    _c(
        "valid-shared-routing-key",
        SECRET,
        None,
        (
            "notifications.webhooks",
            [{"name": n, "format": "pagerduty", "routing_key_env": "PD"} for n in "ab"],
        ),
    ),
    _c("valid-secret-subdir", SECRET, None, ("secret_dirs", ["/etc/drctl", "/var/run/secrets/drctl"])),
    _c("valid-http-host-ipv6", NAMES, None, ("worker.http_host", "::")),
    _c("valid-http-host-name", NAMES, None, ("worker.http_host", "worker.internal")),
]


def _written(work: Path, case: Case) -> Path:
    path = work / f"config_{case.name}.yaml"
    path.write_text(case.text())
    return path


def worker_load(path: Path) -> tuple[bool, str]:
    """What `drctl worker -c PATH` does before it connects: (accepted, the refusal)."""
    try:
        files = config_files([path], [])
        check_fleets([load_config(f) for f in files])
    except ConfigError as exc:
        return False, str(exc)
    except FleetsError as exc:
        return False, str(exc)
    return True, ""


@pytest.fixture(scope="module")
def work() -> Iterator[Path]:
    yield short_tmp_dir("drctl-hostile-config-")


def test_the_corpus_covers_every_class_with_valid_and_refused_cases() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)) and len(CASES) >= 60
    for klass in (CROSS, SECRET, NAMES, HOSTS):
        assert any(c.klass == klass for c in CASES)
    assert sum(c.refused_at is None for c in CASES) >= 6 and any(c.warned_at for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cli_and_worker_give_the_expected_verdict(case: Case, work: Path) -> None:
    path = _written(work, case)
    cpu = time.process_time()
    accepted, refusal = worker_load(path)
    assert time.process_time() - cpu < 1.0, "a verdict must be bounded in time"
    code, out, err = run_cli(["config", "validate", str(path)])
    assert "Traceback" not in out + err
    if case.refused_at is None:
        assert accepted, refusal
        assert code == 0, err
        warned = f"warning: {case.warned_at}:" in " ".join(out.split())
        assert warned == bool(case.warned_at), out
        return
    assert not accepted and code == 2, (code, out, err)
    assert f"{path}: " in refusal and f"{case.refused_at}: " in refusal, refusal
    assert "invalid config" in err and case.refused_at in err, err
    assert "\x1b" not in err and "\u202e" not in err  # a hostile value never reaches the terminal raw


def _refused_unread(path: Path, words: str) -> None:
    """A config path that is not a regular file: refused by both, at once, naming the kind."""
    done: list[tuple[bool, str]] = []
    t = threading.Thread(target=lambda: done.append(worker_load(path)), daemon=True)
    t.start()
    t.join(10)
    assert done, f"the worker's load of {path} blocked"
    accepted, refusal = done[0]
    assert not accepted and words in refusal, refusal
    code, out, err = run_cli(["config", "validate", str(path)])
    assert code == 2 and words in err and "Traceback" not in out + err, err


def test_a_fifo_config_is_refused_without_blocking(work: Path) -> None:
    fifo = work / "config_fifo.yaml"
    os.mkfifo(fifo)
    _refused_unread(fifo, "a FIFO")
    link = work / "config_link-to-fifo.yaml"
    link.symlink_to(fifo)
    _refused_unread(link, "a FIFO")


def test_a_device_or_directory_config_is_refused(work: Path) -> None:
    _refused_unread(Path("/dev/zero"), "a character device")
    (work / "config_dir.yaml").mkdir()
    _refused_unread(work / "config_dir.yaml", "a directory")


def test_a_config_reached_through_a_symlink_works_as_at_its_real_path(work: Path) -> None:
    real = work / "real"
    real.mkdir()
    (real / "token").write_text("t0ken\n")
    case = _c("symlinked", SECRET, None, ("workload.auth", {"token_file": "token"}), ("secret_dirs", []))
    target = _written(real, case)
    link = work / "config_symlinked.yaml"
    link.symlink_to(target)
    for path in (target, link):
        assert worker_load(path) == (True, "")
        code, _, err = run_cli(["config", "validate", str(path)])
        assert code == 0, err
        assert bearer_token(load_config(path).workload.auth) == "t0ken"


def test_a_fifo_token_file_is_refused_when_read(work: Path) -> None:
    secrets = work / "fifo-secrets"
    secrets.mkdir()
    os.mkfifo(secrets / "token")
    case = _c("token-fifo", SECRET, None, ("workload.auth", {"token_file": "fifo-secrets/token"}))
    cfg = load_config(_written(work, case))
    with pytest.raises(AuthConfigError, match="a FIFO"):
        bearer_token(cfg.workload.auth)
