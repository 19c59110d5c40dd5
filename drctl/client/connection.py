"""Temporal client construction, UI links and describe, shared by the CLI, the worker and tests."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from temporalio.client import Client, TLSConfig
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfigProfile
from temporalio.runtime import Runtime

from drctl.client.codec import CodecKeyError, codec_for
from drctl.client.identity import IdentityError
from drctl.client.identity import identity as acting_identity
from drctl.client.plaintext import RefuseMarkedInput, codec_data_converter
from drctl.config.bounded_read import FileRefused, read_regular_file
from drctl.config.schema import FleetConfig


class TemporalUnreachable(RuntimeError):
    def __init__(self, address: str, cause: BaseException) -> None:
        super().__init__(
            f"cannot reach Temporal at {address}: {cause}. Is the server running? "
            "(dev stack: `drctl dev up`; elsewhere check temporal.address in the fleet config)"
        )
        self.address = address


TLS_FILE_MAX_BYTES = 1024 * 1024  # a CA bundle with every public root is about 200 KiB


class TemporalConfigError(ValueError):
    """The temporal section asks for something the environment does not provide (exit 2)."""


def _read(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        # The one bounded reader: a FIFO or /dev/zero named here is refused, not read forever.
        return read_regular_file(path, max_bytes=TLS_FILE_MAX_BYTES, what=f"temporal.tls.{what}")
    except FileRefused as exc:
        raise TemporalConfigError(str(exc)) from None


def _profile(env: Mapping[str, str] | None) -> ClientConfigProfile:
    """What the Temporal CLI would use: its profile file, then TEMPORAL_ADDRESS, _NAMESPACE, _API_KEY, _TLS_*."""
    try:
        return ClientConfigProfile.load(override_env_vars=env)
    except Exception as exc:  # the bridge raises RuntimeError naming the file or variable
        raise TemporalConfigError(
            f"Temporal client settings from the environment (TEMPORAL_*) or the profile file: {exc}"
        ) from None


@dataclass(frozen=True)
class Target:
    """Where and how to connect: the fleet config's temporal section over the Temporal CLI's settings."""

    address: str
    namespace: str
    tls: TLSConfig | bool
    api_key: str | None
    rpc_metadata: Mapping[str, str]
    sources: Mapping[str, str]  # setting -> where it came from, for `drctl config validate` and errors


def target(cfg: FleetConfig, env: Mapping[str, str] | None = None) -> Target:
    """Resolve the connection as the Temporal CLI would, except that the fleet config comes first.

    A setting the fleet config spells out wins; otherwise the Temporal CLI's environment variables
    and profile file (`TEMPORAL_PROFILE`, `TEMPORAL_CONFIG_FILE`, the default file) give it; the
    config's defaults (127.0.0.1:7233, namespace default, no TLS) come last.
    """
    t = cfg.temporal
    given = t.model_fields_set
    prof = _profile(env)
    sources: dict[str, str] = {}

    def pick(name: str, from_profile: str | None, default: str) -> str:
        if name in given:
            sources[name] = "fleet config"
            return str(getattr(t, name))
        if from_profile:
            sources[name] = "Temporal environment/profile"
            return from_profile
        sources[name] = "default"
        return default

    address = pick("address", prof.address, t.address)
    namespace = pick("namespace", prof.namespace, t.namespace)
    tls: TLSConfig | bool = False
    if t.tls:
        sources["tls"] = "fleet config"
        tls = TLSConfig(
            client_cert=_read(t.tls.client_cert_path, "client_cert_path"),
            client_private_key=_read(t.tls.client_key_path, "client_key_path"),
            server_root_ca_cert=_read(t.tls.server_root_ca_cert_path, "server_root_ca_cert_path"),
            domain=t.tls.domain,
        )
    elif prof.tls is not None:
        sources["tls"] = "Temporal environment/profile"
        try:
            tls = prof.tls.to_connect_tls_config()
        except OSError as exc:
            raise TemporalConfigError(
                f"TEMPORAL_TLS_* / profile tls: cannot read {exc.filename}: {exc.strerror}"
            ) from None
    api_key: str | None = None
    if t.api_key_env:
        api_key = (
            os.environ.get(t.api_key_env, "").strip() if env is None else env.get(t.api_key_env, "").strip()
        )
        if not api_key:
            # Connecting without the key would fail later as a confusing auth error, or worse work
            # against a server that allows anonymous access.
            raise TemporalConfigError(
                f"temporal.api_key_env: environment variable {t.api_key_env} is unset or empty"
            )
        sources["api_key"] = f"fleet config ({t.api_key_env})"
    elif prof.api_key:
        api_key = prof.api_key
        sources["api_key"] = "Temporal environment/profile"
    if api_key and tls is False and sources.get("tls") != "Temporal environment/profile":
        # An API key needs TLS; configured TLS (custom CA, server name) is kept, not replaced. Only
        # an explicit TEMPORAL_TLS=false (a local proxy) sends a key in the clear.
        tls = True
    return Target(address, namespace, tls, api_key, dict(prof.grpc_meta or {}), sources)


def connect_options(
    cfg: FleetConfig, env: Mapping[str, str] | None = None, where: Target | None = None
) -> dict[str, Any]:
    """Client.connect keyword arguments: TLS (mTLS and/or a custom CA), API key, namespace, codec."""
    where = where or target(cfg, env)
    try:
        codec = codec_for(cfg.temporal.codec, where.namespace)
    except CodecKeyError as exc:
        raise TemporalConfigError(str(exc)) from None
    return {
        "namespace": where.namespace,
        "data_converter": codec_data_converter(codec) if codec else pydantic_data_converter,
        # Workers built from this client take it too: an activity whose input the codec refused fails.
        "interceptors": [RefuseMarkedInput()] if codec else [],
        "tls": where.tls,
        "api_key": where.api_key,
        "rpc_metadata": where.rpc_metadata,
    }


async def connect(cfg: FleetConfig, runtime: Runtime | None = None, identity: str | None = None) -> Client:
    """Connect with the pydantic data converter (encrypting when `temporal.codec` is set).

    `runtime`: the SDK runtime to use, e.g. one exporting SDK metrics (default: the SDK's default).
    `identity`: the client identity Temporal records on what this client does; default: who is
    acting (`drctl.client.identity`: DRCTL_IDENTITY, temporal.identity, user@host).
    Raises TemporalConfigError for a missing key or file or a bad identity, TemporalUnreachable
    with the address.
    """
    try:
        identity = identity or acting_identity(cfg)
    except IdentityError as exc:
        raise TemporalConfigError(str(exc)) from None
    where = target(cfg)  # the profile file and small PEM and key files, read once at connect time
    address = where.address
    options = connect_options(cfg, where=where)
    try:
        return await Client.connect(address, runtime=runtime, identity=identity, **options)
    except Exception as exc:  # the SDK raises RuntimeError with a transport message
        raise TemporalUnreachable(address, exc) from None


def ui_link(cfg: FleetConfig, workflow_id: str, run_id: str | None = None) -> str:
    base = cfg.temporal.ui_url.rstrip("/")
    ns = quote(target(cfg).namespace, safe="")
    wid = quote(workflow_id, safe="")
    link = f"{base}/namespaces/{ns}/workflows/{wid}"
    return f"{link}/{run_id}" if run_id else link
