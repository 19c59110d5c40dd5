"""`drctl codec-server`: serve the payload codec to the Temporal UI (drctl/client/codec_server.py)."""

from __future__ import annotations

import ipaddress
import logging
import os
from typing import Annotated

import typer

from drctl.cli.common import CONFIG, ConfigOpt, UserError, err_console, load

app = typer.Typer()


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _default_hosts(host: str, port: int) -> list[str]:
    names = [host] + (["localhost", "127.0.0.1", "[::1]"] if _loopback(host) else [])
    return [f"{n}:{port}" for n in names]


@app.command("codec-server")
def codec_server(
    config: ConfigOpt = CONFIG,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8081,
    origin: Annotated[
        list[str] | None,
        typer.Option(
            "--origin",
            help="Browser origin allowed by CORS (repeatable); default the config's temporal.ui_url.",
        ),
    ] = None,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env", help="Env var holding a bearer token every /encode and /decode must present."
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="Host header value the server answers for (repeatable), e.g. codec.example.com; "
            "default the listening host:port (and localhost:port on loopback).",
        ),
    ] = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="Serve without a bearer token: loopback addresses only, for a UI on the same machine.",
        ),
    ] = False,
) -> None:
    """Decrypt and encrypt payloads for the Temporal UI's remote codec setting."""
    from drctl.client.codec import CodecKeyError, codec_for
    from drctl.client.codec_server import CodecServer
    from drctl.client.connection import TemporalConfigError, target

    cfg = load(config)
    if cfg.temporal.codec is None:
        raise UserError("temporal.codec is not configured: there is nothing to decode")
    try:
        # The namespace the fleet's workers and CLI bind ciphertext to (config, then TEMPORAL_*).
        codec = codec_for(cfg.temporal.codec, target(cfg).namespace)
    except (CodecKeyError, TemporalConfigError) as exc:
        raise UserError(str(exc)) from None
    assert codec is not None
    token = None
    if token_env:
        token = os.environ.get(token_env, "").strip()
        if not token:
            raise UserError(f"--token-env: environment variable {token_env} is unset or empty")
    elif not insecure_no_auth:
        raise UserError(
            "the codec server decrypts history: give --token-env NAME (a bearer token the UI sends), "
            "or --insecure-no-auth on a loopback --host"
        )
    elif not _loopback(host):
        raise UserError(f"--insecure-no-auth serves only on a loopback address, not --host {host}")
    hosts = allowed_host or _default_hosts(host, port)
    origins = origin or [cfg.temporal.ui_url]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    err_console.print(
        f"codec server on http://{host}:{port} for namespace {codec.namespace}, origins {', '.join(origins)}"
        + (" (bearer token required)" if token else ""),
        markup=False,
        highlight=False,
    )
    httpd = CodecServer(codec, origins, token, hosts).serve(host, port)
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()
