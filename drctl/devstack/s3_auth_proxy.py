"""The dev stack's AWS endpoint: moto behind a SigV4 checker that refuses temporary keys without their token.

moto accepts any request with any keys, so a client that drops the session token of temporary
credentials (IRSA, an assumed role) passes against moto and fails against AWS with 403. The dev
stack's "moto" component is this module (`python -m drctl.devstack.s3_auth_proxy --port P`): moto
runs in-process on an ephemeral loopback port, and the checker serves `aws.endpoint_url`. The
stack's workers hold temporary keys from moto's STS (worker_credentials.py).

The checker forwards everything to moto and remembers every credential set moto's STS issues
through it (AssumeRole, AssumeRoleWithWebIdentity, GetSessionToken). A request signed with one of
those keys must then carry its token (`X-Amz-Security-Token`, signed) and a valid SigV4 signature,
or it gets the answer AWS gives (S3's error list in botocore's s3 model, the `Error` shape):
- a temporary key (`ASIA...`) without its token, or one this STS never issued: 403
  `InvalidAccessKeyId` ("does not exist in our records");
- a token that is not the one issued with the key: 400 `InvalidToken`;
- a signature that does not verify with the issued secret: 403 `SignatureDoesNotMatch`.
Other services answer the query/REST-XML `ErrorResponse` shape (403 `InvalidClientTokenId`).
Long-term keys (anything else) pass through unchecked, as moto takes them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, unquote

import aiohttp
from aiohttp import web
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

_STS_ISSUERS = ("AssumeRole", "AssumeRoleWithWebIdentity", "AssumeRoleWithSAML", "GetSessionToken")
_CREDENTIAL = re.compile(r"Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request")
_SIGNED = re.compile(r"SignedHeaders=([^,\s]+)")
_SIGNATURE = re.compile(r"Signature=([0-9a-f]+)")
# Hop-by-hop and framing headers that aiohttp sets itself on the way back.
_DROP = {
    "content-length",
    "transfer-encoding",
    "content-encoding",
    "connection",
    "keep-alive",
    "server",
    "date",
}


@dataclass
class Issued:
    secret: str
    token: str


@dataclass
class AuthProxy:
    upstream: str
    issued: dict[str, Issued] = field(default_factory=dict)
    issued_file: Path | None = None  # where issued keys are kept across restarts (the dev stack's)
    refused: list[str] = field(default_factory=list, init=False)  # "METHOD path: Code", one per refusal
    accepted: int = field(default=0, init=False)  # requests signed with an issued key that passed
    _session: aiohttp.ClientSession | None = field(default=None, init=False)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_cleanup.append(self._close)
        return app

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        refusal = self._check(request, body)
        if refusal is not None:
            return refusal
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=60), auto_decompress=False
            )
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with self._session.request(
            request.method, f"{self.upstream.rstrip('/')}{request.raw_path}", headers=headers, data=body
        ) as up:
            reply = await up.read()
            if up.status == 200 and _action(request, body) in _STS_ISSUERS:
                self._remember(reply)
            out = {k: v for k, v in up.headers.items() if k.lower() not in _DROP}
            if request.method == "HEAD":
                # No body, but the object's size: rclone reads it from the HEAD's Content-Length.
                head = web.StreamResponse(status=up.status, headers=out)
                head.headers["Content-Length"] = up.headers.get("Content-Length", "0")
                await head.prepare(request)
                await head.write_eof()
                return head
            return web.Response(body=reply, status=up.status, headers=out)

    def _remember(self, reply: bytes) -> None:
        creds = {el.tag.rsplit("}", 1)[-1]: el.text or "" for el in ET.fromstring(reply).iter()}
        if creds.get("AccessKeyId") and creds.get("SessionToken"):
            self.issued[creds["AccessKeyId"]] = Issued(creds["SecretAccessKey"], creds["SessionToken"])
            if self.issued_file is not None:
                self._save(self.issued_file)

    def _save(self, path: Path) -> None:
        data = {k: {"secret": v.secret, "token": v.token} for k, v in self.issued.items()}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.chmod(0o600)
        tmp.replace(path)

    def load(self, path: Path) -> None:
        """Keys issued before a restart stay valid, as IAM keeps them while moto's memory does not."""
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        self.issued.update({k: Issued(v["secret"], v["token"]) for k, v in data.items()})

    def _check(self, request: web.Request, body: bytes) -> web.Response | None:
        auth = request.headers.get("Authorization", "")
        cred = _CREDENTIAL.search(auth)
        if cred is None:
            return None  # unsigned (AssumeRoleWithWebIdentity) or presigned: not what this guards
        key, _date, region, service = cred.groups()
        issued = self.issued.get(key)
        token = request.headers.get("X-Amz-Security-Token")
        if issued is None and not key.startswith("ASIA"):
            return None  # a long-term key: moto takes any
        if issued is None or token is None:
            return self._refuse(request, service, 403, "InvalidAccessKeyId", _NO_KEY)
        if token != issued.token:
            return self._refuse(request, service, 400, "InvalidToken", _BAD_TOKEN)
        if not self._signature_ok(
            request, body, auth, Credentials(key, issued.secret, token), region, service
        ):
            return self._refuse(request, service, 403, "SignatureDoesNotMatch", _BAD_SIGNATURE)
        self.accepted += 1
        return None

    @staticmethod
    def _signature_ok(
        request: web.Request, body: bytes, auth: str, creds: Credentials, region: str, service: str
    ) -> bool:
        signed = _SIGNED.search(auth)
        given = _SIGNATURE.search(auth)
        if signed is None or given is None or "x-amz-security-token" not in signed.group(1).split(";"):
            return False  # the token must be signed, or anyone could swap it
        names = signed.group(1).split(";")
        headers = {k: v for k, v in request.headers.items() if k.lower() in names}
        path = request.raw_path.split("?", 1)[0]
        # S3's canonical URI is the path as sent; botocore's SigV4Auth (other services) encodes it
        # once more, so it gets the decoded one.
        url = f"http://{request.host}{path if service == 's3' else unquote(path)}"
        if request.query_string:
            url += f"?{request.raw_path.split('?', 1)[1]}"
        aws = AWSRequest(method=request.method, url=url, data=body, headers=headers)
        aws.context["timestamp"] = request.headers.get("X-Amz-Date", "")
        signer_cls = S3SigV4Auth if service == "s3" else SigV4Auth
        signer = signer_cls(creds, service, region)
        canonical = signer.canonical_request(aws)
        return signer.signature(signer.string_to_sign(aws, canonical), aws) == given.group(1)

    def _refuse(
        self, request: web.Request, service: str, status: int, code: str, message: str
    ) -> web.Response:
        self.refused.append(f"{request.method} {request.path}: {code}")
        # Loudly, in the component's log: a path that dropped its token shows here by name.
        print(f"refused {request.method} {request.path} ({service}): {status} {code}", flush=True)
        rid = uuid.uuid4().hex[:16].upper()
        if service == "s3":
            text = (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                f"<Error><Code>{code}</Code><Message>{message}</Message><RequestId>{rid}</RequestId></Error>"
            )
        else:
            code = "InvalidClientTokenId" if code != "SignatureDoesNotMatch" else code
            status = 403
            text = (
                "<ErrorResponse><Error><Type>Sender</Type>"
                f"<Code>{code}</Code><Message>The security token included in the request is invalid."
                f"</Message></Error><RequestId>{rid}</RequestId></ErrorResponse>"
            )
        return web.Response(text=text, status=status, content_type="application/xml")


_NO_KEY = "The AWS Access Key Id you provided does not exist in our records."
_BAD_TOKEN = "The provided token is malformed or otherwise invalid."
_BAD_SIGNATURE = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your key and signing method."
)


def _action(request: web.Request, body: bytes) -> str:
    """The query-protocol Action of a request (STS's), from its form body or query string."""
    form = parse_qs(body.decode("utf-8", "replace")) if body and b"Action=" in body else {}
    return (form.get("Action") or [request.query.get("Action", "")])[0]


async def _serve(host: str, port: int, issued_file: Path | None) -> None:
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    # moto on a port of its own that nothing else is told about: every client goes through the checker.
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    moto_host, moto_port = moto.get_host_and_port()
    proxy = AuthProxy(f"http://{moto_host}:{moto_port}", issued_file=issued_file)
    if issued_file is not None:
        proxy.load(issued_file)
    runner = web.AppRunner(proxy.app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    print(f"SigV4 checker on {host}:{port}, moto on {moto_host}:{moto_port}", flush=True)
    try:
        await asyncio.Event().wait()  # until SIGTERM ends the process
    finally:
        await runner.cleanup()
        moto.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--issued-file", type=Path, help="keep issued temporary keys here across restarts")
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.host, args.port, args.issued_file))


if __name__ == "__main__":
    main()
