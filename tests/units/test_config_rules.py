"""Cross-field config rules, secret paths, names and hosts (drctl/config/rules.py, secret_paths.py).

Each case changes the reference test fleet in one way and checks the verdict of the loader the CLI
and the worker share, and that the problem is reported at the field that makes it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.config.rules import url_key
from drctl.config.schema import ConfigError, FleetConfig, load_config, parse_config
from drctl.config.urls import check_http_url, origin, parse_http_url
from drctl.config.warnings import detection_s, warnings
from tests.support.config import fleet_config_data

BASE = fleet_config_data()


def _problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as refused:
        parse_config(yaml.safe_dump(data), "fleet.yaml")
    assert str(refused.value).startswith("fleet.yaml: ")
    return [(p.path, p.message) for p in refused.value.problems]


def _data(**sections: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(sections)
    return data


def test_the_reference_fleet_is_valid() -> None:
    parse_config(yaml.safe_dump(BASE), "fleet.yaml")


@pytest.mark.parametrize(
    "second",
    [
        "http://127.0.0.1:{port}",
        "http://127.0.0.1:{port}/",
        "HTTP://127.0.0.1:{port}",
    ],
)
def test_two_regions_may_not_share_a_gateway(second: str) -> None:
    data = _data()
    port = data["regions"][0]["gateway_url"].rsplit(":", 1)[1]
    data["regions"][1]["gateway_url"] = second.format(port=port)
    [(path, message)] = _problems(data)
    assert path == "regions[1].gateway_url" and "same gateway as regions[0].gateway_url" in message


def test_default_ports_and_punycode_hosts_compare_equal() -> None:
    assert url_key("http://Example.com/") == url_key("http://example.com:80")
    assert url_key("https://example.com/a/") == url_key("https://example.com:443/a")
    assert url_key("https://example.com/a") != url_key("https://example.com/b")
    # An internationalised host: httpx decodes it for URL.host, urllib keeps punycode; both are one.
    url = parse_http_url("http://xn--bcher-kva.example:8080/v1")
    assert url.host == "bücher.example"
    assert check_http_url("http://xn--bcher-kva.example:8080/v1") == "http://xn--bcher-kva.example:8080/v1"
    assert origin(url).host == "xn--bcher-kva.example"
    # A label the two IDNA standards decode differently (a final sigma) is still one host.
    assert check_http_url("http://xn--nxasmq6b.com/") == "http://xn--nxasmq6b.com/"


def test_a_punycode_gateway_is_accepted() -> None:
    data = _data()
    data["regions"][0]["gateway_url"] = "https://xn--bcher-kva.example:8443"
    data["regions"][1]["gateway_url"] = "https://xn--bcher-kva.example:8443/"
    [(path, message)] = _problems(data)  # and two of them are one gateway
    assert path == "regions[1].gateway_url" and "same gateway" in message
    data["regions"][1]["gateway_url"] = "https://xn--caf-dma.example:8443"
    parse_config(yaml.safe_dump(data), "fleet.yaml")


def test_two_regions_may_not_share_a_kubernetes_api_and_namespace() -> None:
    data = _data()
    data["regions"][1]["kube"] = dict(data["regions"][0]["kube"])
    [(path, message)] = _problems(data)
    assert path == "regions[1].kube" and "same Kubernetes API and namespace as regions[0].kube" in message
    data["regions"][1]["kube"]["namespace"] = "inference-east"  # one API, two namespaces: fine
    parse_config(yaml.safe_dump(data), "fleet.yaml")
    for kube in ({"in_cluster": True}, {"context": "prod"}):
        data["regions"][0]["kube"] = dict(kube)
        data["regions"][1]["kube"] = dict(kube)
        assert [p for p, _ in _problems(data)] == ["regions[1].kube"]


def test_set_identifiers_and_task_queues_are_one_per_region() -> None:
    data = _data()
    data["regions"][1]["route53_set_identifier"] = "us-west-1"  # the first region's default
    assert [p for p, _ in _problems(data)] == ["regions[1].route53_set_identifier"]
    data = _data()
    data["regions"][0]["task_queue"] = "shared"
    data["regions"][1]["task_queue"] = "shared"
    [(path, message)] = _problems(data)
    assert path == "regions[1].task_queue" and "regions[0].task_queue" in message
    data = _data()
    data["regions"][0]["task_queue"] = "drctl"  # temporal.task_queue's default
    [(path, message)] = _problems(data)
    assert path == "regions[0].task_queue" and "same task queue as temporal.task_queue" in message


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "kube-node-lease", "velero", "drctl"])
def test_restores_never_write_into_system_velero_or_drctl_namespaces(namespace: str) -> None:
    data = _data(backup={"restore_namespaces": ["restored", namespace]})
    [(path, message)] = _problems(data)
    assert path == "backup.restore_namespaces[1]" and repr(namespace) in message
    data = _data()
    data["regions"][0]["kube"]["namespace"] = namespace
    assert [p for p, _ in _problems(data)] == ["regions[0].kube.namespace"]


def test_the_namespace_drctl_runs_in_is_configurable() -> None:
    data = _data(backup={"restore_namespaces": ["drctl"]}, worker={"namespace": "ops"})
    parse_config(yaml.safe_dump(data), "fleet.yaml")
    data["backup"]["restore_namespaces"] = ["ops"]
    assert "worker.namespace" in _problems(data)[0][1]


def test_one_variable_fills_one_secret_role() -> None:
    data = _data(workload={"auth": {"token_env": "SHARED"}})
    data["temporal"] = {**data["temporal"], "codec": {"keys_env": "SHARED"}}
    [(path, message)] = _problems(data)
    assert path == "temporal.codec" and "already the inference bearer token (workload.auth)" in message
    data = _data(workload={"auth": {"token_env": "VLLM_KEY"}})
    data["drills"] = {**data["drills"], "allowed_env": ["VLLM_KEY"]}
    [(path, message)] = _problems(data)
    assert path == "drills.allowed_env[0]" and "experiments may not read it" in message


def test_one_file_fills_one_secret_role(tmp_path: Path) -> None:
    data = _data(workload={"auth": {"token_file": "secret"}}, secret_dirs=[str(tmp_path)])
    data["temporal"] = {**data["temporal"], "codec": {"keys_file": "secret"}}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    [problem] = refused.value.problems
    assert problem.path == "temporal.codec" and f"file '{tmp_path / 'secret'}'" in problem.message


def test_two_webhooks_may_share_a_routing_key() -> None:
    hooks = [{"name": n, "format": "pagerduty", "routing_key_env": "PD_KEY"} for n in ("a", "b")]
    parse_config(yaml.safe_dump(_data(notifications={"webhooks": hooks})), "fleet.yaml")


@pytest.mark.parametrize(
    ("dirs", "words"),
    [
        (["."], "not an absolute path"),
        (["secrets"], "not an absolute path"),
        (["/"], "the root directory"),
        (["/etc"], "a system directory"),
        (["/etc/"], "a system directory"),
        (["/usr/../etc"], "a system directory"),
        (["/var/run"], "a system directory"),
        (["/proc/self"], "in /proc"),
        (["/dev/shm"], "in /dev"),
        (["/sys"], "in /sys"),
        (["/root"], "a system directory"),
        (["/home"], "a system directory"),
        (["/lib64"], "a system directory"),
    ],
)
def test_secret_dirs_are_absolute_and_not_system_directories(dirs: list[str], words: str) -> None:
    [(path, message)] = _problems(_data(secret_dirs=dirs))
    assert path == "secret_dirs[0]" and words in message


def test_a_config_in_a_system_directory_does_not_make_it_a_secret_root() -> None:
    data = _data(workload={"auth": {"token_file": "/etc/passwd"}}, secret_dirs=[])
    with pytest.raises(ConfigError, match="outside secret_dirs"):
        parse_config(yaml.safe_dump(data), "/etc/fleet.yaml")


def test_a_config_reached_through_a_symlink_works_as_at_its_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "token").write_text("t0ken\n")
    data = _data(workload={"auth": {"token_file": "token"}}, secret_dirs=[])
    (real / "fleet.yaml").write_text(yaml.safe_dump(data))
    links = tmp_path / "links"
    links.mkdir()
    (links / "fleet.yaml").symlink_to(real / "fleet.yaml")
    cfg = load_config(links / "fleet.yaml")
    assert cfg.workload.auth is not None and cfg.workload.auth.token_file == str(real / "token")
    assert load_config(real / "fleet.yaml").workload == cfg.workload


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("workload", "auth", {"token_env": "vllm key"}),
        ("workload", "auth", {"token_env": "lower_case"}),
        ("temporal", "api_key_env", "1ST"),
        ("temporal", "api_key_env", "A-B"),
        ("worker", "http_host", "localhost; rm -rf /"),
        ("worker", "http_host", "[::1]"),
        ("worker", "http_host", "0x7f.1"),
        ("aws", "region", "us east 1"),
        ("temporal", "identity", "ops\x1b[2J"),
        ("temporal", "identity", "ops\u202etxt"),
    ],
)
def test_name_like_fields_have_patterns(section: str, field: str, value: Any) -> None:
    data = _data()
    data[section] = {**data.get(section, {}), field: value}
    problems = _problems(data)
    assert problems and problems[0][0].startswith(f"{section}.{field}"), problems


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "127.0.0.1", "::", "::1", "worker.internal", "xn--bcher-kva.example"]
)
def test_worker_http_host_takes_a_host_name_or_address(host: str) -> None:
    cfg = parse_config(yaml.safe_dump(_data(worker={"http_host": host})), "fleet.yaml")
    assert cfg.worker.http_host == host


def test_an_rto_below_detection_warns_naming_both_figures() -> None:
    cfg = FleetConfig.model_validate(_data(objectives={"rto_target_s": 10}))
    h = cfg.health
    expected = (
        h.interval_s
        + h.probe_timeout_s
        + (h.failure_threshold - 1) * max(h.fast_confirm_interval_s, h.probe_timeout_s)
    )
    assert detection_s(cfg) == expected
    [w] = [w for w in warnings(cfg) if w.path == "objectives.rto_target_s"]
    assert f"RTO target 10 s is below the detection time {expected:g} s" in w.message
    fine = FleetConfig.model_validate(_data(objectives={"rto_target_s": expected}))
    assert "objectives.rto_target_s" not in [w.path for w in warnings(fine)]
