"""How a worker reaches a cluster: the pod's service account over TLS, and a kubeconfig with exec auth.

Each case makes a real request to a loopback API server that records the Authorization header, so
the test fails if the credential is loaded but never sent.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes.config import incluster_config

from drctl.config.schema import KubeConfig
from drctl.providers.kube_client import KubeCredentialsError, api_client_for, uses_in_cluster
from tests.support.http_stub import Reply, Request, StubServer


class _Recorder:
    seen: list[str | None] = []

    @staticmethod
    def handle(req: Request) -> Reply:
        # The auth scheme is case-insensitive (the in-cluster loader sends "bearer").
        auth = req.headers.get("Authorization")
        _Recorder.seen.append(auth[:7].capitalize() + auth[7:] if auth else auth)
        return Reply(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []})


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "ca.crt", tmp / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def _serve(tls: tuple[Path, Path] | None) -> Iterator[StubServer]:
    _Recorder.seen = []
    ctx = None
    if tls is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(tls[0]), str(tls[1]))
    with StubServer(_Recorder.handle, tls=ctx) as server:
        yield server


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StubServer]:
    """What the kubelet gives a pod: service host/port env and a mounted token plus CA."""
    cert, key = _self_signed(tmp_path)
    token = tmp_path / "token"
    token.write_text("sa-token-1")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(cert))
    for server in _serve((cert, key)):
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
        yield server


def _list_pods(api: client.ApiClient) -> None:
    client.CoreV1Api(api).list_namespaced_pod("inference", _request_timeout=(2, 5))


def test_in_cluster_sends_the_service_account_token_over_verified_tls(pod: StubServer) -> None:
    api = api_client_for(KubeConfig(in_cluster=True))
    _list_pods(api)
    assert _Recorder.seen == ["Bearer sa-token-1"]
    assert api.configuration.host.startswith("https://127.0.0.1:")
    assert api.configuration.verify_ssl


def test_in_cluster_is_detected_when_no_source_is_set(pod: StubServer) -> None:
    kube = KubeConfig()
    assert uses_in_cluster(kube)
    _list_pods(api_client_for(kube))
    assert _Recorder.seen == ["Bearer sa-token-1"]


def test_a_context_wins_over_in_cluster_detection(pod: StubServer) -> None:
    assert not uses_in_cluster(KubeConfig(context="us-east-1"))


def test_in_cluster_outside_a_pod_names_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeCredentialsError, match="in_cluster.*KUBERNETES_SERVICE_HOST is unset"):
        api_client_for(KubeConfig(in_cluster=True))


def _exec_kubeconfig(tmp_path: Path, server_url: str) -> Path:
    """A kubeconfig shaped like `aws eks update-kubeconfig` writes, with the exec plugin swapped for a
    script that prints an ExecCredential (what `aws eks get-token` prints)."""
    plugin = tmp_path / "get-token.py"
    plugin.write_text(
        "import json, sys\n"
        "assert sys.argv[1:] == ['eks', 'get-token', '--cluster-name', 'west'], sys.argv\n"
        "print(json.dumps({'kind': 'ExecCredential', 'apiVersion': 'client.authentication.k8s.io/v1beta1',"
        " 'spec': {}, 'status': {'token': 'k8s-aws-v1.presigned', 'expirationTimestamp': '2099-01-01T00:00:00Z'}}))\n"
    )
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "us-east-1",
        "clusters": [{"name": "west", "cluster": {"server": server_url}}],
        "contexts": [
            {"name": "us-west-1", "context": {"cluster": "west", "user": "eks-west"}},
            {"name": "us-east-1", "context": {"cluster": "west", "user": "nobody"}},
        ],
        "users": [
            {
                "name": "eks-west",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": sys.executable,
                        "args": [str(plugin), "eks", "get-token", "--cluster-name", "west"],
                        "interactiveMode": "Never",
                    }
                },
            },
            {"name": "nobody", "user": {"token": "wrong"}},
        ],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


def test_kubeconfig_context_with_exec_auth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for server in _serve(None):
        url = f"http://127.0.0.1:{server.port}"
        path = _exec_kubeconfig(tmp_path, url)
        _list_pods(api_client_for(KubeConfig(context="us-west-1", kubeconfig_path=str(path))))
    assert _Recorder.seen == ["Bearer k8s-aws-v1.presigned"]


def test_unknown_context_is_a_clear_error(tmp_path: Path) -> None:
    path = _exec_kubeconfig(tmp_path, "http://127.0.0.1:1")
    with pytest.raises(KubeCredentialsError, match=rf"{path}, context eu-west-9"):
        api_client_for(KubeConfig(context="eu-west-9", kubeconfig_path=str(path)))


def test_two_sources_are_refused() -> None:
    with pytest.raises(ValueError, match="only one of api_url, context, in_cluster.*context, in_cluster"):
        KubeConfig(context="x", in_cluster=True)


# --- `drctl eks-token`: the exec plugin the Kubernetes overlays' kubeconfig runs -------------------

_FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
}
_ROOT = Path(__file__).resolve().parents[2]


def _decode(token: str) -> str:
    import base64

    assert token.startswith("k8s-aws-v1.")
    body = token.removeprefix("k8s-aws-v1.")
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def _assert_eks_url(url: str, cluster_region: str) -> None:
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(url)
    q = parse_qs(parts.query)
    assert parts.scheme == "https" and parts.netloc == f"sts.{cluster_region}.amazonaws.com"
    assert q["Action"] == ["GetCallerIdentity"] and q["X-Amz-Expires"] == ["60"]
    # The cluster name is signed in, so a token for one cluster is refused by another.
    assert "x-k8s-aws-id" in q["X-Amz-SignedHeaders"][0].split(";")
    assert (
        q["X-Amz-Credential"][0].startswith("AKIDEXAMPLE/")
        and f"/{cluster_region}/sts/" in q["X-Amz-Credential"][0]
    )


def test_eks_token_as_the_kubeconfig_exec_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for k, v in _FAKE_AWS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PYTHONPATH", str(_ROOT))
    for server in _serve(None):
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "east", "cluster": {"server": f"http://127.0.0.1:{server.port}"}}],
            "contexts": [{"name": "us-east-1", "context": {"cluster": "east", "user": "eks"}}],
            "users": [
                {
                    "name": "eks",
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": sys.executable,
                            "args": [
                                "-m",
                                "drctl",
                                "eks-token",
                                "--cluster-name",
                                "prod-east",
                                "--region",
                                "us-east-1",
                            ],
                            "interactiveMode": "Never",
                        }
                    },
                }
            ],
        }
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig))
        _list_pods(api_client_for(KubeConfig(context="us-east-1", kubeconfig_path=str(path))))
    (auth,) = _Recorder.seen
    assert auth and auth.startswith("Bearer ")
    _assert_eks_url(_decode(auth.removeprefix("Bearer ")), "us-east-1")


def test_eks_token_output_and_missing_credentials() -> None:
    import subprocess

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(_ROOT), **_FAKE_AWS}
    cmd = [sys.executable, "-m", "drctl", "eks-token", "--cluster-name", "prod-west", "--region", "us-west-1"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    cred = json.loads(out.stdout)
    assert cred["kind"] == "ExecCredential" and cred["status"]["expirationTimestamp"].endswith("Z")
    _assert_eks_url(_decode(cred["status"]["token"]), "us-west-1")
    env.pop("AWS_ACCESS_KEY_ID")
    env.pop("AWS_SECRET_ACCESS_KEY")
    out = subprocess.run(
        cmd, capture_output=True, text=True, env={**env, "AWS_EC2_METADATA_DISABLED": "true"}, timeout=60
    )
    assert out.returncode == 1 and "no AWS credentials for the EKS token of prod-west" in out.stderr
