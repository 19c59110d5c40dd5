"""docker-compose.yml cannot run here (no Docker engine), so every reference in it is resolved."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from drctl.config import load_config
from drctl.search_attributes import ALL

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict = COMPOSE["services"]


def _host_path(spec: str) -> str | None:
    src = spec.split(":", 1)[0]
    return src if src.startswith((".", "/", "$", "~")) else None


def test_required_services_exist() -> None:
    images = {name: svc.get("image", "") for name, svc in SERVICES.items()}
    assert any(i.startswith("postgres") for i in images.values())
    assert any("temporalio/auto-setup" in i for i in images.values())
    assert any("temporalio/ui" in i for i in images.values())
    assert any("haproxy" in i for i in images.values())
    assert sum("vllm/vllm-openai" in i for i in images.values()) == 2
    assert SERVICES["drctl-worker"]["build"]["dockerfile"] == "Dockerfile"


def test_depends_on_resolve() -> None:
    for name, svc in SERVICES.items():
        deps = svc.get("depends_on", [])
        for dep in deps if isinstance(deps, list) else deps.keys():
            assert dep in SERVICES, f"{name} depends on unknown service {dep}"


def test_volumes_resolve() -> None:
    named = set(COMPOSE.get("volumes") or {})
    for name, svc in SERVICES.items():
        for spec in svc.get("volumes", []):
            host = _host_path(spec)
            if host is None:
                assert spec.split(":", 1)[0] in named, f"{name}: undeclared named volume in {spec}"
            elif host.startswith("./"):
                assert (ROOT / host).exists(), f"{name}: bind mount source {host} missing"


def test_env_files_and_dockerfile_exist() -> None:
    for name, svc in SERVICES.items():
        env_files = svc.get("env_file", [])
        for f in [env_files] if isinstance(env_files, str) else env_files:
            assert (ROOT / f).is_file(), f"{name}: env_file {f} missing"
        if "build" in svc:
            ctx = ROOT / svc["build"]["context"]
            assert (ctx / svc["build"]["dockerfile"]).is_file()


def test_dockerfile_copies_existing_paths() -> None:
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), f"Dockerfile copies missing {src}"


def test_host_ports_are_unique_and_well_formed() -> None:
    seen: dict[str, str] = {}
    for name, svc in SERVICES.items():
        for spec in svc.get("ports", []):
            assert re.fullmatch(r"\d+:\d+", spec), f"{name}: port {spec!r}"
            host = spec.split(":")[0]
            assert host not in seen, f"host port {host} used by {seen[host]} and {name}"
            seen[host] = name


def test_compose_fleet_config_is_valid_and_matches_services() -> None:
    cfg = load_config(ROOT / "deploy" / "compose" / "fleet.yaml")
    hosts = {re.sub(r"^https?://([^:/]+).*", r"\1", r.gateway_url) for r in cfg.regions}
    assert hosts <= set(SERVICES)
    assert cfg.temporal.address.split(":")[0] in SERVICES


def test_region_gateways_set_the_header_verification_reads() -> None:
    cfg = load_config(ROOT / "deploy" / "compose" / "fleet.yaml")
    text = (ROOT / "deploy" / "compose" / "haproxy-region.cfg").read_text()
    assert f"http-response set-header {cfg.traffic.region_header} ${{REGION}}" in text


def test_search_attribute_script_registers_the_registry() -> None:
    script = (ROOT / "deploy" / "compose" / "register-search-attributes.sh").read_text()
    for key in ALL:
        assert key.name in script


@pytest.mark.parametrize("cfg", ["haproxy-global.cfg", "haproxy-region.cfg"])
def test_haproxy_configs_parse(cfg: str, tmp_path: Path) -> None:
    """HAProxy's own check mode, with service names mapped to loopback."""
    text = (ROOT / "deploy" / "compose" / cfg).read_text()
    text = re.sub(r"(gateway-us-\w+-1|vllm-\$\{REGION\}[\w-]*):", "127.0.0.1:", text)
    text = text.replace("/run/haproxy/", f"{tmp_path}/")
    path = tmp_path / cfg
    path.write_text(text)
    result = subprocess.run(
        [shutil.which("haproxy") or "/usr/sbin/haproxy", "-c", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        env={"REGION": "us-west-1", "PATH": "/usr/sbin:/usr/bin"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
