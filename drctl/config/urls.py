"""One reading of an HTTP URL: the host a check approves is the host httpx connects to.

URL parsers disagree at the edges (WHATWG vs RFC 3986 vs urllib): a backslash, userinfo, a
percent-encoded dot or slash, an IPv4 address written in decimal, octal or hex, an IPv6 zone id or
a non-ASCII host can each make two readers see two hosts. Rather than guess which one httpx agrees
with, anything in those classes is refused; what is left is parsed by httpx (which drctl's probes,
chaos probes and providers use) and used in its re-serialised form.

Messages never repeat the URL: it may hold a credential.
"""

from __future__ import annotations

import ipaddress
import re
from typing import NamedTuple
from urllib.parse import urlsplit

import httpx
import idna

MAX_URL = 2048
_PRINTABLE = re.compile(r"[\x21-\x7e]+")
_PCT = re.compile(r"%(..)?", re.DOTALL)
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_QUAD = re.compile(
    r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}"
)
_IPV6 = re.compile(r"\[[0-9a-fA-F:.]{2,45}\]")
# Percent-encoded bytes that change a path's meaning or that a second parser may decode first.
_ODD_PCT = {f"{c:02X}" for c in [*range(0x00, 0x21), 0x25, 0x2E, 0x2F, 0x5C, *range(0x7F, 0x100)]} | {
    f"{c:02X}" for c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~"
}
CREDENTIAL_HINT = (
    "credentials do not belong in a URL (they would reach logs and workflow history); "
    "use the secret-file fields instead (workload.auth.token_file, routing_key_file, codec.keys_file)"
)


class Origin(NamedTuple):
    scheme: str
    host: str
    port: int


class UrlRefused(ValueError):
    """A URL drctl will not use. The message names the rule, never the URL."""


def _check_host(host: str) -> None:
    if host.startswith("["):
        if not _IPV6.fullmatch(host):
            raise UrlRefused("an IPv6 host must be a plain bracketed address (no zone id)")
        return
    if not host or len(host) > 253 or host.endswith("."):
        raise UrlRefused("the host must be a DNS name or a dotted-quad IPv4 address")
    labels = host.split(".")
    if labels[-1][:1].isdigit():
        # No top-level domain starts with a digit: this is an address, and only dotted-quad
        # decimal is read the same way by every resolver (not 2130706433, 0x7f.1 or 0177.0.0.1).
        if not _QUAD.fullmatch(host):
            raise UrlRefused("an IPv4 host must be written as four decimal numbers 0-255 (a.b.c.d)")
        return
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise UrlRefused("the host must be an ASCII DNS name (letters, digits, '-', dots)")


def _check_percent(raw: str) -> None:
    for m in _PCT.finditer(raw):
        code = (m.group(1) or "").upper()
        if len(code) != 2 or any(c not in "0123456789ABCDEF" for c in code):
            raise UrlRefused("a '%' must start a two-digit hex escape")
        if code in _ODD_PCT:
            raise UrlRefused(
                "percent-encoding of unreserved characters, '.', '/', '\\', '%', controls or "
                "non-ASCII bytes is refused (parsers decode it differently)"
            )


def parse_http_url(raw: object, *, allow_query: bool = True) -> httpx.URL:
    """The httpx reading of `raw`, or UrlRefused for anything two parsers could read differently."""
    if not isinstance(raw, str):
        raise UrlRefused(f"a URL must be a string, not {type(raw).__name__}")
    if len(raw) > MAX_URL:
        raise UrlRefused(f"a URL longer than {MAX_URL} characters")
    if not _PRINTABLE.fullmatch(raw):
        raise UrlRefused("a URL must be printable ASCII: no spaces, control or non-ASCII characters")
    if "\\" in raw:
        raise UrlRefused("a URL must not contain a backslash")
    scheme, sep, rest = raw.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise UrlRefused("only http:// and https:// URLs are allowed here")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        raise UrlRefused(CREDENTIAL_HINT)
    if "%" in authority:
        raise UrlRefused("percent-encoding is not allowed in the host or port")
    if "#" in rest:
        raise UrlRefused("a URL here takes no #fragment")
    if not allow_query and "?" in rest:
        raise UrlRefused("a base URL takes no ?query")
    _check_percent(rest)
    host_port = authority
    if host_port.startswith("["):
        host, _, port_part = host_port.partition("]")
        host += "]"
        port_part = port_part.removeprefix(":") if port_part.startswith(":") or not port_part else "x"
    else:
        host, _, port_part = host_port.partition(":")
    if port_part and (not port_part.isdigit() or not 0 < int(port_part) < 65536 or port_part[0] == "0"):
        raise UrlRefused("the port must be a number 1-65535")
    _check_host(host.lower())
    try:
        url = httpx.URL(raw)
    except (httpx.InvalidURL, ValueError):
        raise UrlRefused("not a URL httpx can parse") from None
    if url.userinfo:
        raise UrlRefused(CREDENTIAL_HINT)
    if url.scheme not in ("http", "https") or not url.host:
        raise UrlRefused("only http:// and https:// URLs with a host are allowed here")
    _same_host_everywhere(url)
    return url


def ascii_host(host: str) -> str:
    """A host in its one comparable form: lowercase ASCII, an internationalised name in punycode.

    httpx decodes `xn--` labels for `URL.host` (IDNA 2008) while urllib and urllib3 keep them, and
    the two IDNA standards decode some labels differently (a final sigma), so hosts are compared
    encoded, never decoded.
    """
    host = host.strip("[]").rstrip(".")
    if host.isascii():
        return host.lower()
    try:
        return idna.encode(host, uts46=True).decode("ascii").lower()
    except idna.IDNAError:
        return host.lower()


def _same_host_everywhere(url: httpx.URL) -> None:
    """The serialised form must name one host for httpx, urllib and urllib3 (which `requests`,
    and so Chaos Toolkit's own http provider, uses): the proof that the checks above were enough."""
    text = str(url)
    hosts = {ascii_host(url.raw_host.decode("ascii")), ascii_host(urlsplit(text).hostname or "")}
    try:
        from urllib3.util import parse_url
    except ImportError:  # pragma: no cover - urllib3 comes with requests and botocore
        pass
    else:
        hosts.add(ascii_host(parse_url(text).host or ""))
    if len(hosts) != 1:
        raise UrlRefused("HTTP libraries read this URL's host differently")


def origin(url: httpx.URL) -> Origin:
    return Origin(
        url.scheme,
        ascii_host(url.raw_host.decode("ascii")),
        url.port or (443 if url.scheme == "https" else 80),
    )


def check_host(raw: object) -> str:
    """A bare host (a bind address, a TLS server name): a DNS name (ASCII, punycode for an
    international one) or an IP literal, IPv6 without brackets. The message never repeats it."""
    if not isinstance(raw, str):
        raise UrlRefused(f"a host must be a string, not {type(raw).__name__}")
    if len(raw) > 253 or not _PRINTABLE.fullmatch(raw):
        raise UrlRefused("a host must be printable ASCII: no spaces, control or non-ASCII characters")
    if ":" in raw:
        try:
            ipaddress.IPv6Address(raw)
        except ValueError:
            raise UrlRefused("a host must be a DNS name or an IP address (IPv6 without brackets)") from None
        return raw
    _check_host(raw.lower())
    return raw


def check_host_port(raw: object) -> str:
    """A gRPC address as the Temporal CLI's TEMPORAL_ADDRESS takes it: host:port, nothing else.

    A scheme, userinfo or path has no meaning there, and a host two resolvers read differently is
    refused by the rules of `_check_host`. The message never repeats the address.
    """
    example = "host:port, e.g. 127.0.0.1:7233 or <namespace>.<account>.tmprl.cloud:7233"
    if not isinstance(raw, str):
        raise UrlRefused(f"an address must be a string, not {type(raw).__name__}")
    if len(raw) > 300 or not _PRINTABLE.fullmatch(raw):
        raise UrlRefused(f"must be {example}, in printable ASCII (no spaces or controls)")
    if "://" in raw:
        raise UrlRefused(f"must be {example}, without a scheme")
    if "@" in raw:
        raise UrlRefused("credentials do not belong in the address: use temporal.api_key_env or temporal.tls")
    if any(c in raw for c in "/?#\\%"):
        raise UrlRefused(f"must be {example}, without a path, query or escapes")
    if raw.startswith("["):
        host, _, rest = raw.partition("]")
        host, port = host + "]", rest.removeprefix(":") if rest.startswith(":") else ""
    else:
        host, _, port = raw.rpartition(":")
    if not port.isdigit() or port[0] == "0" or not 0 < int(port) < 65536 or not host:
        raise UrlRefused(f"must be {example}: the port is a number 1-65535")
    _check_host(host.lower())
    return raw


def check_http_url(raw: object, *, allow_query: bool = True) -> str:
    """`raw` re-serialised by httpx, after the checks of parse_http_url."""
    return str(parse_http_url(raw, allow_query=allow_query))
