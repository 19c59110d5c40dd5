"""A Route 53 stand-in that behaves as the real service does: an HTTP proxy in front of moto.

moto applies a change and answers INSYNC at once. Real Route 53 answers PENDING and reports INSYNC
only once every authoritative server has the change (AWS: "generally within 60 seconds"), and it
refuses requests with Throttling (5 requests/s per account) or PriorRequestNotComplete. This proxy
forwards everything to moto, except that:
- ChangeResourceRecordSets answers PENDING, and GetChange keeps answering PENDING for `pending_s`
  (its value when the change was accepted) after the change was accepted;
- errors queued with `inject(operation, code)` are answered instead of forwarding, once each;
- `on_visible(change_id)`, when set, runs `visible_after_s` after each accepted change: the moment
  resolvers start returning the new answer (a test uses it to move the emulated clients' traffic).
Every call is counted per operation, so a test can prove there was no retry storm.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime

import httpx

from tests.support.http_stub import Reply, Request, StubServer

NS = "https://route53.amazonaws.com/doc/2013-04-01/"
_RRSET = re.compile(r"^/2013-04-01/hostedzone/[^/]+/rrset/?$")
_CHANGE = re.compile(r"^/2013-04-01/change/(?P<id>[^/?]+)$")
# Host is kept: the dev stack's AWS endpoint checks each request's SigV4 signature, which covers
# the Host the client signed (this proxy's address), as a real endpoint behind a proxy would.
_HOP = {"content-length", "connection", "transfer-encoding", "accept-encoding"}


def operation(method: str, path: str) -> str:
    """The Route 53 operation a REST request is, as far as this stand-in cares."""
    path = path.split("?", 1)[0]
    if method == "POST" and _RRSET.match(path):
        return "ChangeResourceRecordSets"
    if method == "GET" and _RRSET.match(path):
        return "ListResourceRecordSets"
    if method == "GET" and _CHANGE.match(path):
        return "GetChange"
    return f"{method} {path}"


class Route53StandIn:
    """Start with `with Route53StandIn(moto_url, pending_s=60) as r53:`; point boto3 at `r53.url`."""

    def __init__(self, moto_url: str, pending_s: float = 60.0, visible_after_s: float = 0.0) -> None:
        self.moto_url = moto_url.rstrip("/")
        self.pending_s = pending_s
        self.visible_after_s = visible_after_s
        self.on_visible: Callable[[str], None] | None = None
        self.calls: Counter[str] = Counter()
        # change id (no /change/ prefix) → (monotonic accept time, pending_s when it was accepted)
        self.changes: dict[str, tuple[float, float]] = {}
        self._errors: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []
        self._server = StubServer(self._serve, name="route53-standin")
        self.url = self._server.url

    def __enter__(self) -> Route53StandIn:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for t in self._timers:
            t.cancel()
        self._server.close()

    def inject(self, op: str, *codes: str) -> None:
        """Answer the next len(codes) calls of `op` with these error codes, in order."""
        with self._lock:
            self._errors.setdefault(op, []).extend(codes)

    def status(self, change_id: str) -> str:
        accepted = self.changes.get(change_id.removeprefix("/change/"))
        if accepted is not None and time.monotonic() - accepted[0] < accepted[1]:
            return "PENDING"
        return "INSYNC"

    # --- HTTP -------------------------------------------------------------------------------------

    def _serve(self, req: Request) -> Reply:
        op = operation(req.method, req.path)
        body = req.body
        with self._lock:
            self.calls[op] += 1
            pending_s = self.pending_s  # as the request arrived: a test may change it once it is counted
            queued = self._errors.get(op)
            error = queued.pop(0) if queued else None
        if error is not None:
            return _reply(400, _error_xml(error))
        change = _CHANGE.match(req.path.split("?", 1)[0]) if op == "GetChange" else None
        if change is not None:
            cid = change["id"]
            return _reply(200, _change_xml("GetChangeResponse", cid, self.status(cid)))
        headers = {k: v for k, v in req.headers.items() if k.lower() not in _HOP}
        resp = httpx.request(req.method, self.moto_url + req.path, content=body, headers=headers, timeout=10)
        text = resp.content
        if op == "ChangeResourceRecordSets" and resp.status_code == 200:
            cid = re.search(rb"<Id>(?:/change/)?([^<]+)</Id>", text)
            assert cid, text
            change_id = cid.group(1).decode()
            with self._lock:
                self.changes[change_id] = (time.monotonic(), pending_s)
            text = re.sub(rb"<Status>INSYNC</Status>", b"<Status>PENDING</Status>", text)
            if self.on_visible is not None:
                timer = threading.Timer(self.visible_after_s, self.on_visible, args=(change_id,))
                timer.daemon = True
                self._timers.append(timer)
                timer.start()
        return _reply(resp.status_code, text, resp.headers.get("content-type", "text/xml"))


def _reply(status: int, body: bytes, ctype: str = "text/xml") -> Reply:
    return Reply(status, body, headers={"x-amzn-RequestId": "standin"}, content_type=ctype)


def _change_xml(root: str, change_id: str, status: str) -> bytes:
    submitted = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><{root} xmlns="{NS}"><ChangeInfo>'
        f"<Id>/change/{change_id}</Id><Status>{status}</Status><SubmittedAt>{submitted}</SubmittedAt>"
        f"</ChangeInfo></{root}>"
    ).encode()


def _error_xml(code: str) -> bytes:
    message = {
        "Throttling": "Rate exceeded",
        "PriorRequestNotComplete": "The request was rejected because Route 53 was still processing a "
        "prior request.",
    }.get(code, code)
    return (
        f'<?xml version="1.0"?><ErrorResponse xmlns="{NS}"><Error><Type>Sender</Type><Code>{code}</Code>'
        f"<Message>{message}</Message></Error><RequestId>standin</RequestId></ErrorResponse>"
    ).encode()
