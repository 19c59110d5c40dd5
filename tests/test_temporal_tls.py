"""The Temporal connection as users configure it: TLS, mTLS, the Temporal CLI's TEMPORAL_* settings.

The dev server speaks plain gRPC only (`temporal server start-dev` has no TLS flags), so HAProxy
terminates TLS in front of it, as a load balancer in front of a Temporal cluster does: one listener
with server TLS, one that also requires a client certificate (mTLS). The certificates are made here.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from drctl.client.connection import target, ui_link
from drctl.config.schema import parse_config
from tests.support.cli import run_cli
from tests.support.config import short_tmp_dir
from tests.support.ports import free_port, listening
from tests.support.temporal import dev_server_command
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[1]
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
BASE = (ROOT / "config" / "fleet.yaml").read_text()


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer[0].subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def _pem(obj: x509.Certificate | ec.EllipticCurvePrivateKey) -> bytes:
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    return obj.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="module")
def tls_temporal() -> Iterator[dict[str, str]]:
    """A dev server behind HAProxy: `tls` (server TLS) and `mtls` (client certificate required) ports."""
    if not Path(HAPROXY).exists():
        pytest.skip("HAProxy is not installed (make deps)")
    d = short_tmp_dir("drctl-tls-")
    ca_key = _key()
    ca = _cert("drctl test CA", ca_key, None, ca=True)
    server_key, client_key = _key(), _key()
    server = _cert("localhost", server_key, (ca, ca_key))
    client = _cert("drctl-operator", client_key, (ca, ca_key))
    (d / "ca.pem").write_bytes(_pem(ca))
    (d / "server.pem").write_bytes(_pem(server) + _pem(server_key))
    (d / "client.pem").write_bytes(_pem(client))
    (d / "client.key").write_bytes(_pem(client_key))
    dev, tls, mtls = free_port(), free_port(), free_port()
    (d / "haproxy.cfg").write_text(
        f"""global
    maxconn 100
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend temporal_tls
    bind 127.0.0.1:{tls} ssl crt {d}/server.pem alpn h2
    default_backend temporal_frontend
frontend temporal_mtls
    bind 127.0.0.1:{mtls} ssl crt {d}/server.pem ca-file {d}/ca.pem verify required alpn h2
    default_backend temporal_frontend
backend temporal_frontend
    server dev 127.0.0.1:{dev}
"""
    )
    procs = []
    with (d / "temporal.log").open("w") as out:
        procs.append(
            subprocess.Popen(
                dev_server_command(dev, free_port()),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        )
        procs.append(
            subprocess.Popen(
                [HAPROXY, "-db", "-f", str(d / "haproxy.cfg")], stdout=out, stderr=subprocess.STDOUT
            )
        )
    try:
        wait_until(
            lambda: listening(dev) and listening(tls) and listening(mtls),
            timeout_s=60,
            what="dev server and TLS proxy up",
        )
        yield {
            "dir": str(d),
            "tls": f"127.0.0.1:{tls}",
            "mtls": f"127.0.0.1:{mtls}",
            "plain": f"127.0.0.1:{dev}",
        }
    finally:
        for p in procs:
            p.terminate()
            p.wait(20)


def _config(tmp: Path, temporal_section: str) -> Path:
    text = BASE.replace(
        "temporal:\n  address: 127.0.0.1:7233\n  ui_url: http://127.0.0.1:8233\n", temporal_section
    )
    assert text != BASE
    # The test's certificates live in a directory of /tmp: one the config allows secret files in.
    text += "\nsecret_dirs: [/tmp]\n"
    path = tmp / "fleet.yaml"
    path.write_text(text)
    return path


def _ops_list(path: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (env or {}).items():
            mp.setenv(name, value)
        return run_cli(["ops", "list", "-o", "json", "-c", str(path)])


def test_mtls_connects_with_the_client_certificate_and_not_without(
    tls_temporal: dict[str, str], tmp_path: Path
) -> None:
    d = tls_temporal["dir"]
    good = _config(
        tmp_path,
        f"temporal:\n  address: {tls_temporal['mtls']}\n  tls:\n    server_root_ca_cert_path: {d}/ca.pem\n"
        f"    client_cert_path: {d}/client.pem\n    client_key_path: {d}/client.key\n",
    )
    code, out, err = _ops_list(good)
    assert code == 0 and json.loads(out) == [], err
    no_cert = _config(
        tmp_path,
        f"temporal:\n  address: {tls_temporal['mtls']}\n  tls:\n    server_root_ca_cert_path: {d}/ca.pem\n",
    )
    code, _, err = _ops_list(no_cert)
    assert (
        code == 3 and f"cannot reach Temporal at {tls_temporal['mtls']}" in err and "Traceback" not in err
    ), err


def test_server_tls_needs_the_ca_that_signed_it(tls_temporal: dict[str, str], tmp_path: Path) -> None:
    d = tls_temporal["dir"]
    trusted = _config(
        tmp_path,
        f"temporal:\n  address: {tls_temporal['tls']}\n  tls:\n    server_root_ca_cert_path: {d}/ca.pem\n",
    )
    code, out, err = _ops_list(trusted)
    assert code == 0 and json.loads(out) == [], err
    code, out, err = run_cli(["ops", "list", "--all", "-o", "json", "-c", str(trusted)])
    assert code == 0 and json.loads(out) == [], err
    system_roots = _config(tmp_path, f"temporal:\n  address: {tls_temporal['tls']}\n  tls: {{}}\n")
    code, _, err = _ops_list(system_roots)
    assert code == 3 and "cannot reach Temporal" in err, err


def test_the_temporal_cli_environment_configures_a_config_that_leaves_it_out(
    tls_temporal: dict[str, str], tmp_path: Path
) -> None:
    d = tls_temporal["dir"]
    path = _config(tmp_path, "temporal:\n  ui_url: http://127.0.0.1:8233\n")
    env = {
        "TEMPORAL_ADDRESS": tls_temporal["mtls"],
        "TEMPORAL_NAMESPACE": "default",
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": f"{d}/ca.pem",
        "TEMPORAL_TLS_CLIENT_CERT_PATH": f"{d}/client.pem",
        "TEMPORAL_TLS_CLIENT_KEY_PATH": f"{d}/client.key",
    }
    code, out, err = _ops_list(path, env)
    assert code == 0 and json.loads(out) == [], err
    # The same settings from a Temporal CLI profile file (TEMPORAL_CONFIG_FILE names it).
    (tmp_path / "temporal.toml").write_text(
        f'[profile.default]\naddress = "{tls_temporal["mtls"]}"\n[profile.default.tls]\n'
        f'server_ca_cert_path = "{d}/ca.pem"\nclient_cert_path = "{d}/client.pem"\nclient_key_path = "{d}/client.key"\n'
    )
    code, out, err = _ops_list(path, {"TEMPORAL_CONFIG_FILE": str(tmp_path / "temporal.toml")})
    assert code == 0 and json.loads(out) == [], err


def test_fleet_config_values_come_before_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    explicit = parse_config(
        _config(tmp_path, "temporal:\n  address: 127.0.0.1:7299\n  namespace: prod\n").read_text(),
        base_dir=ROOT / "config",
    )
    env = {"TEMPORAL_ADDRESS": "127.0.0.1:7300", "TEMPORAL_NAMESPACE": "other", "TEMPORAL_API_KEY": "k"}
    got = target(explicit, env)
    assert (got.address, got.namespace, got.sources["address"]) == ("127.0.0.1:7299", "prod", "fleet config")
    # The key the environment gives is still used (the config names none), and it turns TLS on.
    assert got.api_key == "k" and got.tls is True
    silent = parse_config(
        _config(tmp_path, "temporal:\n  ui_url: http://ui:8233\n").read_text(), base_dir=ROOT / "config"
    )
    got = target(silent, env)
    assert (got.address, got.namespace) == ("127.0.0.1:7300", "other")
    assert got.sources["address"] == "Temporal environment/profile"
    # The UI link names the namespace actually used.
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "other")
    assert "/namespaces/other/" in ui_link(silent, "failover/dev")
    monkeypatch.delenv("TEMPORAL_NAMESPACE")
    assert target(silent, {}).address == "127.0.0.1:7233"


def test_a_broken_temporal_profile_is_a_config_error_not_a_traceback(tmp_path: Path) -> None:
    path = _config(tmp_path, "temporal:\n  ui_url: http://127.0.0.1:8233\n")
    (tmp_path / "temporal.toml").write_text("[profile.default\naddress = ")
    code, _, err = _ops_list(path, {"TEMPORAL_CONFIG_FILE": str(tmp_path / "temporal.toml")})
    assert code == 2 and "profile file" in err and "Traceback" not in err, err
