"""drctl.providers.aws: dummy keys only for a keyless emulator, the real chain everywhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.reports import ReportStore
from drctl.config.schema import FleetConfig
from drctl.providers import aws
from drctl.providers.route53 import route53_client
from tests.support.config import tuned


@pytest.fixture
def no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An environment where boto3's chain finds nothing (and never waits on instance metadata)."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _access_key(client: object) -> str | None:
    creds = client._request_signer._credentials  # type: ignore[attr-defined]
    return creds.access_key if creds is not None else None


def _without_endpoint(cfg: FleetConfig) -> FleetConfig:
    return tuned(cfg, "aws", endpoint_url=None)


def test_emulator_without_credentials_gets_dummy_keys_and_works(
    no_aws_credentials: None, fleet_config: FleetConfig, dev_stack: object
) -> None:
    assert aws.credentials_for(fleet_config) == aws.EMULATOR_KEYS
    store = ReportStore(fleet_config)
    assert _access_key(store.s3) == "drctl-dev"
    # The keys are only there so botocore signs: moto answers both services with them.
    buckets = [b["Name"] for b in store.s3.list_buckets()["Buckets"]]
    assert fleet_config.drills.history_bucket in buckets
    r53 = route53_client(fleet_config)
    assert _access_key(r53) == "drctl-dev"
    assert any(z["Name"] == "drctl.test." for z in r53.list_hosted_zones()["HostedZones"])


def test_real_credentials_are_never_replaced(
    no_aws_credentials: None, monkeypatch: pytest.MonkeyPatch, fleet_config: FleetConfig
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-secret")
    assert aws.credentials_for(fleet_config) == {}
    assert _access_key(aws.client(fleet_config, "s3")) == "AKIAREALKEY"
    assert _access_key(route53_client(fleet_config)) == "AKIAREALKEY"


def test_real_aws_without_credentials_gets_no_dummy_keys(
    no_aws_credentials: None, fleet_config: FleetConfig
) -> None:
    cfg = _without_endpoint(fleet_config)
    assert aws.credentials_for(cfg) == {}
    # boto3 is left to fail at request time with its own "Unable to locate credentials".
    assert _access_key(aws.client(cfg, "s3")) is None
