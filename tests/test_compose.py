"""docker-compose.yml cannot run here (no Docker engine): every reference in it is resolved, and the parts
that can run without Docker do (HAProxy under the image's uid, the worker's uid, the healthchecks)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.config.schema import load_config
from drctl.models.search_attributes import ALL
from tests.support.compose_files import env_files
from tests.support.http_stub import Reply, Request, StubServer
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict = COMPOSE["services"]


def _host_path(spec: str) -> str | None:
    src = spec.split(":", 1)[0]
    return src if src.startswith((".", "/", "$", "~")) else None


def test_required_services_exist() -> None:
    images = {name: svc.get("image", "") for name, svc in SERVICES.items()}
    assert any(i.startswith("postgres") for i in images.values())
    # The supported images: the server, its schema set up by admin-tools (auto-setup is deprecated).
    assert not any("auto-setup" in i for i in images.values())
    assert images["temporal"].startswith("temporalio/server:")
    assert images["temporal-schema"].startswith("temporalio/admin-tools:")
    assert images["temporal-schema"].split(":")[1] == images["temporal"].split(":")[1]
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
    for f, required in env_files(SERVICES).items():
        assert (ROOT / f).is_file() or not required, f"env_file {f} missing"
    for svc in SERVICES.values():
        if "build" in svc:
            ctx = ROOT / svc["build"]["context"]
            assert (ctx / svc["build"]["dockerfile"]).is_file()


def test_dockerfile_copies_existing_paths() -> None:
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:  # not a build-stage copy
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


# `haproxy -c` on these configs, failing on any warning: tests/devstack/test_haproxy_configs.py.


# --- Runtime sockets, healthchecks and credentials, run for real as far as Docker is not needed ----

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
HAPROXY_IMAGE_UID = 99  # the haproxy:2.6 image's USER (uid and gid 99), which has no /run/haproxy


def _ids(spec: str) -> tuple[int, int]:
    uid, gid = spec.split(":")
    return int(uid), int(gid)


def _dockerfile_user() -> tuple[int, int]:
    text = (ROOT / "Dockerfile").read_text()
    user = re.search(r"^USER (\d+:\d+)$", text, re.M)
    assert user, "the Dockerfile's USER must be numeric uid:gid (Kubernetes runAsNonRoot checks it)"
    assert re.search(rf"useradd .*--uid {_ids(user.group(1))[0]} --gid {_ids(user.group(1))[1]}", text)
    return _ids(user.group(1))


def _mapped(cfg: str, tmp: Path, run_dir: Path, region: str = "us-west-1") -> tuple[Path, dict[str, int]]:
    """A compose HAProxy config runnable here: service names to loopback, ports to free ones."""
    from tests.support.ports import free_port

    text = (ROOT / "deploy" / "compose" / cfg).read_text()
    text = re.sub(r"(gateway-us-\w+-1|vllm-\$\{REGION\}[\w-]*):", "127.0.0.1:", text)
    text = text.replace("/run/haproxy/", f"{run_dir}/").replace("${REGION}", region)
    ports: dict[str, int] = {}
    for port in re.findall(r"bind :(\d+)", text):
        ports[port] = free_port()
        text = text.replace(f"bind :{port}", f"bind 127.0.0.1:{ports[port]}")
    stable = free_port()
    ports["stable"] = stable
    text = text.replace("127.0.0.1:8000 weight 100", f"127.0.0.1:{stable} weight 100")
    path = tmp / cfg
    path.write_text(text)
    return path, ports


def _as(uid: int, gid: int, cmd: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *cmd]


def _start_haproxy(cfg: Path, uid: int | None = None) -> subprocess.Popen[str]:
    cmd = [HAPROXY, "-db", "-f", str(cfg)]
    return subprocess.Popen(
        _as(uid, uid, cmd) if uid is not None else cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.terminate()
    out, _ = proc.communicate(timeout=10)
    return out


@pytest.fixture
def run_dir() -> Any:
    from tests.support.config import short_tmp_dir

    base = short_tmp_dir("drctl-run-")
    base.chmod(0o755)
    d = base / "haproxy"
    d.mkdir(mode=0o755)  # what a fresh named volume looks like: root-owned 755
    yield d
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to HAProxy's and the worker's uids needs root")
def test_runtime_socket_is_reachable_by_the_worker_only(run_dir: Path) -> None:
    cfg, _ = _mapped("haproxy-global.cfg", run_dir.parent, run_dir)  # readable by HAProxy's uid
    sock = run_dir / "global.sock"
    # Without the init service HAProxy, not root, cannot even create its socket: the original bug.
    bare = _start_haproxy(cfg, HAPROXY_IMAGE_UID)
    try:
        assert bare.wait(10) != 0
    finally:
        assert "socket" in _stop(bare).lower()
    init = SERVICES["haproxy-run-dir"]
    assert init["user"] == "0:0" and "haproxy-run:/run/haproxy" in init["volumes"]
    script = init["command"][-1].replace("/run/haproxy", str(run_dir))
    subprocess.run(["sh", "-c", script], check=True, timeout=10)
    worker_uid, worker_gid = _ids(SERVICES["drctl-worker"]["user"])
    assert (worker_uid, worker_gid) == _dockerfile_user()
    proc = _start_haproxy(cfg, HAPROXY_IMAGE_UID)
    try:
        wait_until(lambda: sock.exists() or proc.poll() is not None, 10, what="the runtime socket")
        assert proc.poll() is None, _stop(proc)
        st = sock.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (HAPROXY_IMAGE_UID, worker_gid, 0o660)
        client = (
            "from drctl.providers.haproxy_runtime import HAProxyRuntime; import sys; "
            "print(HAProxyRuntime(sys.argv[1]).get_weights('global'))"
        )
        env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
        ok = subprocess.run(
            _as(worker_uid, worker_gid, [sys.executable, "-c", client, str(sock)]),
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert ok.returncode == 0 and "'us-west-1': 60" in ok.stdout, ok.stderr
        other = subprocess.run(
            _as(worker_uid + 1, worker_gid + 1, [sys.executable, "-c", client, str(sock)]),
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert other.returncode != 0 and "Permission denied" in other.stderr
    finally:
        _stop(proc)


def test_fleet_sockets_live_in_the_volume_the_worker_and_haproxies_share() -> None:
    cfg = load_config(ROOT / "deploy" / "compose" / "fleet.yaml")
    sockets = [cfg.traffic.global_tier.runtime_socket] + [r.gateway_runtime_socket for r in cfg.regions]
    for name in ["drctl-worker", "haproxy-global", "gateway-us-west-1", "gateway-us-east-1"]:
        assert "haproxy-run:/run/haproxy" in SERVICES[name]["volumes"], name
    assert all(s and s.startswith("/run/haproxy/") for s in sockets)
    configured = set(
        re.findall(r"stats socket (\S+)", (ROOT / "deploy/compose/haproxy-global.cfg").read_text())
    )
    region_cfg = (ROOT / "deploy/compose/haproxy-region.cfg").read_text()
    for r in cfg.regions:
        configured |= {s.replace("${REGION}", r.name) for s in re.findall(r"stats socket (\S+)", region_cfg)}
    assert configured == set(sockets)


def test_worker_gets_aws_credentials() -> None:
    worker = SERVICES["drctl-worker"]
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
    ]:
        assert var in worker["environment"], var  # a bare name passes the host's value through
    assert any(v.endswith(":/home/drctl/.aws:ro") for v in worker["volumes"])


def _healthcheck(service: str, port_map: dict[str, int]) -> list[str]:
    test = SERVICES[service]["healthcheck"]["test"]
    assert test[0] == "CMD"
    cmd = [sys.executable if test[1] == "python" else test[1], *test[2:]]
    for old, new in port_map.items():
        cmd = [
            c.replace(f"127.0.0.1/{old}", f"127.0.0.1/{new}").replace(
                f"127.0.0.1:{old}/", f"127.0.0.1:{new}/"
            )
            for c in cmd
        ]
    return cmd


def _healthy(cmd: list[str]) -> bool:
    return subprocess.run(cmd, capture_output=True, timeout=15).returncode == 0


class _Status:
    status = 200

    @staticmethod
    def handle(_req: Request) -> Reply:
        return Reply(_Status.status, content_type=None)


def _serve(port: int = 0) -> StubServer:
    return StubServer(_Status.handle, port=port).start()


def test_gateway_healthcheck_follows_its_servers(run_dir: Path, tmp_path: Path) -> None:
    cfg, ports = _mapped("haproxy-region.cfg", tmp_path, run_dir)
    proc = _start_haproxy(cfg)
    check = _healthcheck("gateway-us-west-1", {"8410": ports["8410"]})
    try:
        wait_until(lambda: (run_dir / "us-west-1.sock").exists(), 10, what="gateway start")
        assert not _healthy(check), "healthy with no inference server behind it"
        _Status.status = 200
        server = _serve(ports["stable"])
        try:
            wait_until(lambda: _healthy(check), 15, what="gateway healthy once its server passes checks")
        finally:
            server.close()
    finally:
        _stop(proc)


def test_global_healthcheck(run_dir: Path, tmp_path: Path) -> None:
    cfg, ports = _mapped("haproxy-global.cfg", tmp_path, run_dir)
    check = _healthcheck("haproxy-global", {"8404": ports["8404"]})
    assert not _healthy(check)  # nothing listening yet
    proc = _start_haproxy(cfg)
    try:
        wait_until(lambda: _healthy(check), 10, what="global HAProxy healthy")
    finally:
        _stop(proc)


def test_worker_healthcheck_reads_healthz() -> None:
    server = _serve()
    try:
        check = _healthcheck("drctl-worker", {"9464": server.port})
        assert any(f":{server.port}/healthz" in c for c in check)
        _Status.status = 200
        assert _healthy(check)
        _Status.status = 503
        assert not _healthy(check)
    finally:
        server.close()
    assert not _healthy(check)  # nothing listening
