"""Temporal client construction and UI links, shared by the CLI, the worker and tests."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from temporalio.client import Client, TLSConfig
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime

from drctl.client.codec import CodecKeyError, codec_for
from drctl.config.schema import FleetConfig


class TemporalUnreachable(RuntimeError):
    def __init__(self, address: str, cause: BaseException) -> None:
        super().__init__(
            f"cannot reach Temporal at {address}: {cause}. Is the server running? "
            "(dev stack: `drctl dev up`; elsewhere check temporal.address in the fleet config)"
        )
        self.address = address


class TemporalConfigError(ValueError):
    """The temporal section asks for something the environment does not provide (exit 2)."""


def _read(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TemporalConfigError(f"temporal.tls.{what}: cannot read {path}: {exc.strerror}") from None


def connect_options(cfg: FleetConfig) -> dict[str, Any]:
    """Client.connect keyword arguments: TLS (mTLS and/or a custom CA), API key, codec."""
    t = cfg.temporal
    tls: TLSConfig | bool = False
    if t.tls:
        tls = TLSConfig(
            client_cert=_read(t.tls.client_cert_path, "client_cert_path"),
            client_private_key=_read(t.tls.client_key_path, "client_key_path"),
            server_root_ca_cert=_read(t.tls.server_root_ca_cert_path, "server_root_ca_cert_path"),
            domain=t.tls.domain,
        )
    api_key: str | None = None
    if t.api_key_env:
        api_key = os.environ.get(t.api_key_env, "").strip()
        if not api_key:
            # Connecting without the key would fail later as a confusing auth error, or worse work
            # against a server that allows anonymous access.
            raise TemporalConfigError(
                f"temporal.api_key_env: environment variable {t.api_key_env} is unset or empty"
            )
        # An API key needs TLS; the configured TLS (custom CA, server name) is kept, not replaced.
        tls = tls or True
    try:
        codec = codec_for(t.codec, t.namespace)
    except CodecKeyError as exc:
        raise TemporalConfigError(str(exc)) from None
    converter = (
        dataclasses.replace(pydantic_data_converter, payload_codec=codec)
        if codec
        else pydantic_data_converter
    )
    return {"namespace": t.namespace, "data_converter": converter, "tls": tls, "api_key": api_key}


async def connect(cfg: FleetConfig, runtime: Runtime | None = None) -> Client:
    """Connect with the pydantic data converter (encrypting when `temporal.codec` is set).

    `runtime`: the SDK runtime to use, e.g. one exporting SDK metrics (default: the SDK's default).
    Raises TemporalConfigError for a missing key or file, TemporalUnreachable with the address.
    """
    options = connect_options(cfg)  # small PEM and key files, read once at connect time
    try:
        return await Client.connect(cfg.temporal.address, runtime=runtime, **options)
    except Exception as exc:  # the SDK raises RuntimeError with a transport message
        raise TemporalUnreachable(cfg.temporal.address, exc) from None


def ui_link(cfg: FleetConfig, workflow_id: str, run_id: str | None = None) -> str:
    base = cfg.temporal.ui_url.rstrip("/")
    ns = quote(cfg.temporal.namespace, safe="")
    wid = quote(workflow_id, safe="")
    link = f"{base}/namespaces/{ns}/workflows/{wid}"
    return f"{link}/{run_id}" if run_id else link
