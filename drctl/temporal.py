"""Temporal client construction and UI links, shared by the CLI, the worker and tests."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from temporalio.client import Client, TLSConfig
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime

from drctl.config import FleetConfig


class TemporalUnreachable(RuntimeError):
    def __init__(self, address: str, cause: BaseException) -> None:
        super().__init__(
            f"cannot reach Temporal at {address}: {cause}. Is the server running? "
            "(dev stack: `drctl dev up`; elsewhere check temporal.address in the fleet config)"
        )
        self.address = address


async def connect(cfg: FleetConfig, runtime: Runtime | None = None) -> Client:
    """Connect with the pydantic data converter; raises TemporalUnreachable with the address.

    `runtime`: the SDK runtime to use, e.g. one exporting SDK metrics (default: the SDK's default).
    """
    t = cfg.temporal
    tls: TLSConfig | bool = False
    # Reading three small PEM files once at connect time; not worth a thread hop.
    if t.tls:
        tls = TLSConfig(
            client_cert=Path(t.tls.client_cert_path).read_bytes(),  # noqa: ASYNC240
            client_private_key=Path(t.tls.client_key_path).read_bytes(),  # noqa: ASYNC240
            server_root_ca_cert=Path(t.tls.server_root_ca_cert_path).read_bytes()  # noqa: ASYNC240
            if t.tls.server_root_ca_cert_path
            else None,
            domain=t.tls.domain,
        )
    api_key = os.environ.get(t.api_key_env) if t.api_key_env else None
    try:
        return await Client.connect(
            t.address,
            namespace=t.namespace,
            data_converter=pydantic_data_converter,
            tls=tls if not api_key else True,
            api_key=api_key,
            runtime=runtime,
        )
    except Exception as exc:  # the SDK raises RuntimeError with a transport message
        raise TemporalUnreachable(t.address, exc) from None


def ui_link(cfg: FleetConfig, workflow_id: str, run_id: str | None = None) -> str:
    base = cfg.temporal.ui_url.rstrip("/")
    ns = quote(cfg.temporal.namespace, safe="")
    wid = quote(workflow_id, safe="")
    link = f"{base}/namespaces/{ns}/workflows/{wid}"
    return f"{link}/{run_id}" if run_id else link
