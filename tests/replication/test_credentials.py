"""Temporary credentials as production has them: every AWS path drctl starts carries the session token.

The shipped overlays run workers with IRSA (web identity), whose keys S3 refuses without their token.
moto takes any keys, so these tests put drctl.devstack.s3_auth_proxy (the dev stack's AWS endpoint)
in front of it: it records the keys moto's STS issues and refuses a temporary key without its
token, as AWS does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from botocore.exceptions import ClientError

from drctl.devstack.moto_seed import MODEL_FILES
from drctl.devstack.s3_auth_proxy import AuthProxy
from drctl.models.rpo import replica_pairs
from drctl.providers import aws
from drctl.providers.eks_token import presigned_url
from drctl.providers.errors import classify
from drctl.providers.rclone import Rclone
from drctl.providers.route53 import route53_client
from tests.support.loop_thread import LoopThread
from tests.support.moto import aws_client
from tests.support.ports import free_port
from tests.support.replication import fleet

# Every variable of boto3's chain that could hand it other keys than the ones a test sets.
_CHAIN = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ENDPOINT_URL_STS",
)


@pytest.fixture(scope="module")
def proxy(moto_url: str) -> Iterator[tuple[str, AuthProxy]]:
    loop, port = LoopThread(), free_port()
    auth = AuthProxy(moto_url)
    loop.serve_app(auth.app(), port)
    try:
        yield f"http://127.0.0.1:{port}", auth
    finally:
        loop.close()


@pytest.fixture(autouse=True)
def clean_chain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in _CHAIN:
        monkeypatch.delenv(name, raising=False)
    # No shared files either: the chain must find exactly what the test gives it.
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")


def assume_role(url: str) -> dict[str, str]:
    """Temporary keys from moto's STS, issued through the proxy so that it knows them."""
    sts = aws_client("sts", url)
    creds: dict[str, str] = sts.assume_role(
        RoleArn="arn:aws:iam::123456789012:role/drctl-worker", RoleSessionName="drctl-test"
    )["Credentials"]
    assert creds["AccessKeyId"].startswith("ASIA")
    return creds


@pytest.fixture
def buckets(moto_url: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    src, dst = f"src-{tag}", f"dst-{tag}"
    c = aws_client("s3", moto_url)
    for b in (src, dst):
        c.create_bucket(Bucket=b)
    for key, body in MODEL_FILES.items():
        c.put_object(Bucket=src, Key=key, Body=body)
    return src, dst


def s3_with(url: str, key: str, secret: str, token: str | None) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        aws_session_token=token,
    )


def test_the_stand_in_refuses_a_temporary_key_as_s3_does(
    proxy: tuple[str, AuthProxy], buckets: tuple[str, str]
) -> None:
    url, auth = proxy
    c = assume_role(url)
    key, secret, token = c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"]
    expected = {
        None: (403, "InvalidAccessKeyId"),
        "not-the-token": (400, "InvalidToken"),
    }
    for given, (status, code) in expected.items():
        with pytest.raises(ClientError) as info:
            s3_with(url, key, secret, given).list_objects_v2(Bucket=buckets[0])
        err = info.value.response
        assert (err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"]) == (status, code)
        # drctl's error table: bad credentials, never retried.
        assert (classify(info.value).kind, classify(info.value).retryable) == ("Unauthorized", False)
    with pytest.raises(ClientError, match="SignatureDoesNotMatch"):
        s3_with(url, key, "not-the-secret", token).list_objects_v2(Bucket=buckets[0])
    before = auth.accepted
    listed = s3_with(url, key, secret, token).list_objects_v2(Bucket=buckets[0])
    assert {o["Key"] for o in listed["Contents"]} == set(MODEL_FILES)
    assert auth.accepted == before + 1


def test_rclone_carries_the_session_token_of_the_chain(
    proxy: tuple[str, AuthProxy], buckets: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys from the environment, as an assumed role leaves them: copy, check and lag all pass."""
    url, auth = proxy
    c = assume_role(url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", c["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", c["SecretAccessKey"])
    monkeypatch.setenv("AWS_SESSION_TOKEN", c["SessionToken"])
    cfg = fleet(url, *buckets)
    (pair,) = replica_pairs(cfg)
    rc, refused, accepted = Rclone(cfg), len(auth.refused), auth.accepted
    assert rc.transfer(pair).transfers == len(MODEL_FILES)
    lag = rc.measure_lag(pair)
    assert (lag.error, lag.lag_s, lag.missing) == (None, 0.0, 0), lag
    assert auth.refused[refused:] == []
    assert auth.accepted > accepted  # the requests were signed with the temporary key


def test_web_identity_as_irsa_sets_it(
    proxy: tuple[str, AuthProxy], buckets: tuple[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """IRSA's variables only: boto3's chain calls AssumeRoleWithWebIdentity, and rclone, the S3
    client and the Route 53 client all sign with the keys it got, token included."""
    url, auth = proxy
    token_file = tmp_path / "token"
    token_file.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZHJjdGwifQ.c2ln")
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/drctl-worker")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", url)  # the chain's STS call goes to moto, via the proxy
    issued = set(auth.issued)
    keys = aws.resolved_keys()
    assert keys is not None and keys.token and keys.access_key.startswith("ASIA")
    assert keys.access_key in set(auth.issued) - issued

    cfg = fleet(url, *buckets)
    (pair,) = replica_pairs(cfg)
    refused, accepted = len(auth.refused), auth.accepted
    assert Rclone(cfg).transfer(pair).transfers == len(MODEL_FILES)
    assert Rclone(cfg).measure_lag(pair).lag_s == 0.0
    assert {b["Name"] for b in aws.client(cfg, "s3").list_buckets()["Buckets"]} >= set(buckets)
    route53_client(cfg).list_hosted_zones()
    assert auth.refused[refused:] == []
    assert auth.accepted >= accepted + 4


def test_named_variables_carry_their_token(
    proxy: tuple[str, AuthProxy], buckets: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, auth = proxy
    c = assume_role(url)
    extra = (
        "  endpoints:\n"
        "    us-east-1: {access_key_id_env: DRCTL_T_KEY, secret_access_key_env: DRCTL_T_SECRET,\n"
        "                session_token_env: DRCTL_T_TOKEN}\n"
        "    us-west-1: {access_key_id_env: DRCTL_T_KEY, secret_access_key_env: DRCTL_T_SECRET,\n"
        "                session_token_env: DRCTL_T_TOKEN}\n"
    )
    cfg = fleet(url, *buckets, extra=extra)
    (pair,) = replica_pairs(cfg)
    monkeypatch.setenv("DRCTL_T_KEY", c["AccessKeyId"])
    monkeypatch.setenv("DRCTL_T_SECRET", c["SecretAccessKey"])
    with pytest.raises(Exception, match="DRCTL_T_TOKEN not set"):
        Rclone(cfg).transfer(pair)
    monkeypatch.setenv("DRCTL_T_TOKEN", c["SessionToken"])
    refused = len(auth.refused)
    assert Rclone(cfg).transfer(pair).transfers == len(MODEL_FILES)
    assert auth.refused[refused:] == []


def test_a_dropped_token_is_an_unknown_lag_with_the_reason(
    proxy: tuple[str, AuthProxy], buckets: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replica's endpoint given temporary keys without their token (a variable left unset):
    the stand-in answers 403 as S3 does, and the lag is unknown, never "in sync"."""
    url, auth = proxy
    c = assume_role(url)
    extra = (
        "  endpoints:\n"
        "    us-east-1: {access_key_id_env: DRCTL_T_KEY, secret_access_key_env: DRCTL_T_SECRET}\n"
    )
    monkeypatch.setenv("DRCTL_T_KEY", c["AccessKeyId"])
    monkeypatch.setenv("DRCTL_T_SECRET", c["SecretAccessKey"])
    cfg = fleet(url, *buckets, extra=extra)
    (pair,) = replica_pairs(cfg)
    refused = len(auth.refused)
    lag = Rclone(cfg).measure_lag(pair)
    assert lag.lag_s is None and lag.error and "InvalidAccessKeyId" in lag.error, lag
    assert any("InvalidAccessKeyId" in r for r in auth.refused[refused:])


def test_the_eks_token_carries_the_session_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubeconfig exec plugin's presigned GetCallerIdentity: EKS checks it with STS, which
    refuses temporary keys without their token, so the URL must carry it (no request is sent)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ASIAEXAMPLETEMPORARY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "the-session-token")
    query = parse_qs(urlsplit(presigned_url("prod-west", "us-west-1")).query)
    assert query["X-Amz-Security-Token"] == ["the-session-token"]
    assert query["X-Amz-Credential"][0].startswith("ASIAEXAMPLETEMPORARY/")
