"""`drctl config validate`: valid files pass with a summary; each broken file exits 2 naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drctl.config.schema import ConfigError, load_config
from tests.support.cli import drctl

ROOT = Path(__file__).resolve().parents[1]
GOOD = (ROOT / "config" / "fleet.yaml").read_text()


SHIPPED = [
    "config/fleet.yaml",
    "config/fleet.example.yaml",
    "deploy/compose/fleet.yaml",
    "deploy/kubernetes/overlays/us-west-1/fleet.yaml",
    "deploy/kubernetes/overlays/us-east-1/fleet.yaml",
]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_are_valid(name: str) -> None:
    result = drctl("config", "validate", str(ROOT / name))
    assert result.returncode == 0, result.stderr
    assert "is valid" in result.stdout
    # A shipped config must not defeat its own objectives (e.g. a TTL longer than the RTO allows).
    assert "warning" not in result.stdout + result.stderr
    assert "us-west-1" in result.stdout and "us-east-1" in result.stdout


def test_defaults_match_the_reference_deployment() -> None:
    cfg = load_config(ROOT / "config" / "fleet.yaml")
    assert cfg.weights == {"us-west-1": 60, "us-east-1": 40}
    assert [r.replicas for r in cfg.regions] == [2, 2]
    assert cfg.health.interval_s == 10 and cfg.health.failure_threshold == 3
    assert cfg.objectives.rto_target_s == 30 and cfg.objectives.rpo_target_s == 5


def _mutate(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


# (case name, file text, field path that must be named, words the message must contain)
BROKEN = [
    ("yaml-syntax", _mutate("  failure_threshold: 3", "  failure_threshold: [3"), "line ", "YAML syntax"),
    (
        "unknown-key",
        _mutate("  interval_s: 10", "  interval_s: 10\n  intervall_s: 5"),
        "health.intervall_s",
        "unknown key",
    ),
    ("wrong-type", _mutate("    weight: 60", "    weight: sixty"), "regions[0].weight", "integer"),
    (
        "duplicate-region",
        _mutate("  - name: us-east-1", "  - name: us-west-1"),
        "regions[1].name",
        "duplicate region",
    ),
    (
        "weights-zero",
        _mutate("    weight: 60", "    weight: 0").replace("    weight: 40", "    weight: 0"),
        "regions[*].weight",
        "cannot be normalised",
    ),
    (
        "negative-weight",
        _mutate("    weight: 40", "    weight: -5"),
        "regions[1].weight",
        "greater than or equal",
    ),
    (
        "interval-vs-timeout",
        _mutate("  probe_timeout_s: 2", "  probe_timeout_s: 10"),
        "health",
        "must be longer than probe_timeout_s",
    ),
    (
        "provider-mismatch",
        _mutate("    kind: haproxy\n    runtime_socket", "    kind: route53\n    runtime_socket"),
        "traffic.global.runtime_socket",
        "unknown key",
    ),
    (
        "unknown-provider",
        _mutate("  regional:\n    kind: haproxy", "  regional:\n    kind: nginx"),
        "traffic.regional",
        "kind",
    ),
    (
        "missing-field",
        _mutate("    gateway_url: http://127.0.0.1:8420\n", ""),
        "regions[1].gateway_url",
        "Field required",
    ),
    ("not-a-mapping", "- just\n- a list\n", "(top level)", "mapping"),
    (
        "capacity-half",
        _mutate("  image: vllm/vllm-openai:v0.33.0", "  image: vllm/vllm-openai:v0.6.3\n  peak_rps: 100"),
        "workload",
        "max_rps_per_replica and peak_rps together",
    ),
    (
        "approval-reminder",
        _mutate(
            "failover:\n  policy: automatic",
            "failover:\n  policy: automatic\n  approval_timeout_s: 60\n  approval_reminder_s: 60",
        ),
        "failover",
        "approval_reminder_s (60) must be less than approval_timeout_s (60)",
    ),
    (
        "drill-target",
        _mutate("  allowed_targets: [us-west-1, us-east-1]", "  allowed_targets: [eu-west-9]"),
        "(top level)",
        "eu-west-9",
    ),
]


@pytest.mark.parametrize(("case", "text", "field", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_config_exits_2_naming_the_field(
    tmp_path: Path, case: str, text: str, field: str, words: str
) -> None:
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    result = drctl("config", "validate", str(path))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert str(path) in result.stderr
    assert field in result.stderr, result.stderr
    assert words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    text = _mutate("    weight: 60", "    weight: sixty")
    text = text.replace("  interval_s: 10", "  interval_s: 10\n  bogus: 1")
    with pytest.raises(ConfigError) as err:
        path = tmp_path / "two.yaml"
        path.write_text(text)
        load_config(path)
    paths = {p.path for p in err.value.problems}
    assert {"regions[0].weight", "health.bogus"} <= paths


def test_missing_file_is_a_clear_error() -> None:
    result = drctl("config", "validate", "/nonexistent/fleet.yaml")
    assert result.returncode == 2
    assert "/nonexistent/fleet.yaml" in result.stderr and "cannot read" in result.stderr


def test_relative_paths_resolve_against_the_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "fleet.yaml"
    path.write_text(GOOD)
    cfg = load_config(path)
    assert cfg.state_dir() == (tmp_path / ".drctl" / "dev").resolve()


def test_route53_ttl_longer_than_the_rto_budget_warns_but_is_valid(tmp_path: Path) -> None:
    example = (ROOT / "config" / "fleet.example.yaml").read_text()
    assert "ttl_s: 10\n" in example
    path = tmp_path / "fleet.yaml"
    path.write_text(example.replace("ttl_s: 10\n", "ttl_s: 60\n"))
    result = drctl("config", "validate", str(path))
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "is valid" in out
    assert "warning: traffic.global.ttl_s: TTL 60 s exceeds the RTO budget" in out
    assert "rto_target_s 30 s minus detection ~19 s" in out and "leaves 11 s" in out
    as_json = drctl("config", "validate", str(path), "--output", "json")
    assert as_json.returncode == 0
    assert [w["path"] for w in json.loads(as_json.stdout)["warnings"]] == ["traffic.global.ttl_s"]
    # The shipped example keeps its TTL inside the budget: no warning.
    clean = drctl("config", "validate", str(ROOT / "config" / "fleet.example.yaml"))
    assert clean.returncode == 0 and "warning" not in clean.stdout


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("http://user:s3cr3t@evil.example:7233", "without a scheme"),
        ("user:s3cr3t@evil.example:7233", "credentials do not belong in the address"),
        ("evil.example:7233/ns", "without a path"),
        ("evil.example", "the port is a number"),
        ("2130706433:7233", "four decimal numbers"),
    ],
)
def test_temporal_address_is_host_and_port_only(tmp_path: Path, address: str, words: str) -> None:
    """temporal.address takes what TEMPORAL_ADDRESS takes; anything else is refused, never echoed."""
    path = tmp_path / "fleet.yaml"
    path.write_text(_mutate("  address: 127.0.0.1:7233", f"  address: {json.dumps(address)}"))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert [(p.path, words in p.message) for p in err.value.problems] == [("temporal.address", True)]
    assert "s3cr3t" not in str(err.value) and "evil" not in str(err.value)


def test_temporal_address_forms_the_temporal_cli_takes_are_valid(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    for address in ("temporal:7233", "prod.a1b2c.tmprl.cloud:7233", "[::1]:7233", "localhost:7233"):
        path.write_text(_mutate("  address: 127.0.0.1:7233", f'  address: "{address}"'))
        assert load_config(path).temporal.address == address
    path.write_text(_mutate("  address: 127.0.0.1:7233", "  address: http://user:s3cr3t@evil.example:7233"))
    result = drctl("config", "validate", str(path), "-o", "json")
    assert result.returncode == 2 and "temporal.address" in result.stderr, result.stderr
    assert "s3cr3t" not in result.stdout + result.stderr and "Traceback" not in result.stderr
