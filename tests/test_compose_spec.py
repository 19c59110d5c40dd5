"""docker-compose.yml against the Compose specification, and the one-shot setup services' contracts.

The schema is vendored (tests/data/compose-spec.json, from github.com/compose-spec/compose-spec,
schema/compose-spec.json at commit a08f8d51631b7127ddac3d2c65537db429d0f1d0, Apache-2.0), so the
check runs offline. The search-attribute script runs for real against Temporal dev servers.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
import yaml

from drctl.models.search_attributes import ALL
from tests.support.compose_files import env_files
from tests.support.ports import free_port
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict = COMPOSE["services"]
SCHEMA = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
TEMPORAL = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
REGISTER = ROOT / "deploy" / "compose" / "register-search-attributes.sh"
DOC = (ROOT / "docs" / "compose.md").read_text()


def _one_shot(svc: dict) -> bool:
    return svc.get("restart") == "no"


def test_the_compose_file_is_valid_against_the_compose_spec_schema() -> None:
    validator = jsonschema.Draft7Validator(SCHEMA)
    errors = sorted(validator.iter_errors(COMPOSE), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


def test_the_schema_check_rejects_what_compose_rejects() -> None:
    """The vendored schema really constrains: a typo'd key and a bad condition both fail it."""
    validator = jsonschema.Draft7Validator(SCHEMA)
    typo = {"services": {"a": {"image": "x", "helthcheck": {"test": ["CMD", "true"]}}}}
    bad_condition = {"services": {"a": {"image": "x", "depends_on": {"b": {"condition": "service_ready"}}}}}
    assert not validator.is_valid(typo) and not validator.is_valid(bad_condition)


def test_every_long_running_service_has_a_healthcheck() -> None:
    for name, svc in SERVICES.items():
        if _one_shot(svc):
            continue  # a one-shot is waited for with service_completed_successfully instead
        check = svc.get("healthcheck")
        assert check and check.get("test") and not check.get("disable"), f"{name} has no healthcheck"
    assert all("healthcheck" in SERVICES[f"vllm-{r}"] for r in ("us-west-1", "us-east-1"))


def test_every_dependency_waits_for_health_or_completion() -> None:
    for name, svc in SERVICES.items():
        deps = svc.get("depends_on", {})
        assert isinstance(deps, dict), f"{name}: depends_on without conditions only waits for a start"
        for dep, spec in deps.items():
            want = "service_completed_successfully" if _one_shot(SERVICES[dep]) else "service_healthy"
            assert spec.get("condition") == want, f"{name} -> {dep}: condition {spec.get('condition')}"
    # The order an SRE relies on: schema, server, namespace and attributes, then the worker.
    assert "temporal-schema" in SERVICES["temporal"]["depends_on"]
    assert "temporal-setup" in SERVICES["drctl-worker"]["depends_on"]


def test_compose_runs_the_temporal_releases_the_tests_run() -> None:
    """The server, its admin-tools (schema and attributes) and the UI: the versions in supported-versions.md."""
    row = next(
        line
        for line in (ROOT / "docs" / "supported-versions.md").read_text().splitlines()
        if line.startswith("| Temporal server |")
    )
    tested = re.search(r"Server \*\*([\d.]+)\*\*.*UI \*\*([\d.]+)\*\*", row)
    assert tested, row
    server, ui = tested.groups()
    tags = {
        image.split(":")[0]: image.split(":")[1]
        for svc in SERVICES.values()
        if (image := svc.get("image", "")).startswith("temporalio/")
    }
    assert tags == {"temporalio/server": server, "temporalio/admin-tools": server, "temporalio/ui": ui}
    every_admin_tools = {s["image"] for s in SERVICES.values() if "admin-tools" in s.get("image", "")}
    assert every_admin_tools == {f"temporalio/admin-tools:{server}"}


def test_no_setup_step_swallows_its_failure() -> None:
    for script in (REGISTER, ROOT / "deploy" / "compose" / "setup-postgres-schema.sh"):
        text = script.read_text()
        assert "|| true" not in text and re.search(r"^set -eu$", text, re.M), script.name
    text = (ROOT / "deploy" / "compose" / "setup-postgres-schema.sh").read_text()
    for step in ("create", "setup-schema -v 0.0", "update-schema -d"):
        assert step in text
    assert "--plugin postgres12" in text and "$SCHEMA/$dir/versioned" in text
    assert "temporal:temporal temporal_visibility:visibility" in text


def _documented_vars() -> dict[str, set[str]]:
    """docs/compose.md's env-file table: file -> the variables its row names."""
    rows = re.findall(r"^\| `(deploy/compose/[\w.]+)`[^|]*\|[^|]*\|(.*)\|$", DOC, re.M)
    return {f: set(re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)) for f, cell in rows}


def test_every_env_file_is_documented_with_the_variables_it_sets() -> None:
    files = env_files(SERVICES)
    required = {f for f, req in files.items() if req}
    assert required == {str(p.relative_to(ROOT)) for p in (ROOT / "deploy" / "compose").glob("*.env")}
    documented = _documented_vars()
    assert set(documented) == set(files), "docs/compose.md's env-file table and the services' env files"
    for f in required:
        sets = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", (ROOT / f).read_text(), re.M))
        # Both ways: a variable the file sets is documented, and the docs name no variable it lacks.
        assert documented[f] == sets, (
            f"{f}: sets {sorted(sets)}, docs/compose.md says {sorted(documented[f])}"
        )


def test_the_optional_env_file_is_never_committed() -> None:
    optional = [f for f, req in env_files(SERVICES).items() if not req]
    assert optional == ["deploy/compose/vllm.local.env"]
    for f in optional:
        assert not (ROOT / f).exists(), f"{f} holds secrets and must not be in the repository"
        ignored = subprocess.run(["git", "check-ignore", "-q", f], cwd=ROOT, timeout=30)
        assert ignored.returncode == 0, f"{f} is not git-ignored"
    assert "HUGGING_FACE_HUB_TOKEN" in _documented_vars()[optional[0]]


# --- the search-attribute registration, run against real dev servers ---------------------------


@pytest.fixture
def server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [TEMPORAL, "server", "start-dev", "--headless", "--port", str(port), "--ui-port", str(free_port())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    address = f"127.0.0.1:{port}"
    try:
        wait_until(
            lambda: _temporal("operator", "cluster", "health", "--address", address).returncode == 0, 30
        )
        yield address
    finally:
        proc.terminate()
        proc.wait(30)


def _temporal(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TEMPORAL, *argv], capture_output=True, text=True, timeout=60)


def _register(
    address: str, namespace: str = "default", attempts: int = 40
) -> subprocess.CompletedProcess[str]:
    # A new namespace reaches the dev server's frontend cache within its 10 s refresh: 40 x 0.5 s.
    env = {
        "PATH": f"{Path(TEMPORAL).parent}:/usr/bin:/bin",
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_NAMESPACE": namespace,
        "TEMPORAL_HEALTH_ATTEMPTS": str(attempts),
        "TEMPORAL_HEALTH_PAUSE_S": "0.5",
    }
    return subprocess.run(["sh", str(REGISTER)], capture_output=True, text=True, timeout=120, env=env)


def test_registration_is_idempotent_and_registers_the_registry(server: str) -> None:
    assert {k.name for k in ALL} == set(re.search(r'NAMES="([^"]+)"', REGISTER.read_text())[1].split())
    first = _register(server, "drctl")  # a namespace that does not exist yet is created
    assert first.returncode == 0, first.stdout + first.stderr
    listed = json.loads(
        _temporal(
            "operator", "search-attribute", "list", "--address", server, "--namespace", "drctl", "-o", "json"
        ).stdout
    )
    assert {k.name: "INDEXED_VALUE_TYPE_KEYWORD" for k in ALL}.items() <= listed["customAttributes"].items()
    again = _register(server, "drctl")
    assert again.returncode == 0 and "registered in drctl" in again.stdout, again.stdout + again.stderr


def test_registration_fails_loudly_on_a_conflict_or_no_server(server: str) -> None:
    made = _temporal(
        "operator",
        "search-attribute",
        "create",
        "--address",
        server,
        "--name",
        "DrctlPhase",
        "--type",
        "Text",
    )
    assert made.returncode == 0, made.stderr
    clash = _register(server)
    assert clash.returncode != 0 and "DrctlPhase: cannot register in namespace default" in clash.stderr
    assert "different type" in clash.stderr
    gone = _register(f"127.0.0.1:{free_port()}", attempts=3)
    assert gone.returncode != 0 and "is not healthy after 3 attempts" in gone.stderr
