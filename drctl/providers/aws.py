"""boto3 clients for the fleet's AWS account, or for the emulator `aws.endpoint_url` points at.

The one place that decides credentials: real AWS always goes through boto3's normal credential
chain (environment, shared files, web identity as IRSA sets it, container and instance roles). Only
when `aws.endpoint_url` is set (moto in the dev stack, which accepts any keys) and that chain finds
nothing are dummy keys given, because botocore refuses to sign a request without some.
Subprocesses (rclone) get the same chain's keys through `resolved_keys`, session token included:
temporary keys are refused by S3 without it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import boto3

from drctl.config.schema import FleetConfig

EMULATOR_KEYS = {"aws_access_key_id": "drctl-dev", "aws_secret_access_key": "drctl-dev"}


def credentials_for(cfg: FleetConfig, session: boto3.Session | None = None) -> dict[str, str]:
    """Explicit credentials to pass to boto3: dummy ones for a keyless emulator, else none."""
    if not cfg.aws.endpoint_url:
        return {}
    if (session or boto3.Session()).get_credentials() is not None:
        return {}
    return dict(EMULATOR_KEYS)


def client(cfg: FleetConfig, service: str, config: Any = None) -> Any:
    """A boto3 client for `service` in `aws.region`, honouring `aws.endpoint_url`; `config`: a botocore Config."""
    # One session decides and signs: boto3's default session caches the credentials it first saw,
    # so checking a fresh session but building on the default one could disagree.
    session = boto3.Session()
    return session.client(
        service,
        region_name=cfg.aws.region,
        endpoint_url=cfg.aws.endpoint_url,
        config=config,
        **credentials_for(cfg, session),
    )


class Keys(NamedTuple):
    """One set of keys as the chain resolved them; `token` is None for long-term keys."""

    access_key: str
    secret_key: str
    token: str | None


def resolved_keys(session: boto3.Session | None = None) -> Keys | None:
    """The chain's current keys, for a subprocess that cannot run boto3's chain itself.

    botocore refreshes temporary keys (web identity, assumed roles) at least 10 minutes before
    they expire, so keys taken here just before a subprocess starts stay valid for that long.
    None when the chain finds nothing.
    """
    creds = (session or boto3.Session()).get_credentials()
    if creds is not None:
        frozen = creds.get_frozen_credentials()
        return Keys(frozen.access_key, frozen.secret_key, frozen.token or None)
    return None
