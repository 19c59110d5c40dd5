"""Render the dev stack's HAProxy configs: the global tier and one gateway per region.

Only the topology lives in the files. Weights the product sets and the replicas the node agent
adds are runtime state, changed over the runtime API sockets named here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit

from drctl.config.schema import TRACKS, FleetConfig, HAProxyGlobal, HAProxyRegional, RegionConfig

# Weights of the region backend's track servers at start: all traffic on stable.
TRACK_WEIGHTS = {"stable": 100, "canary": 0, "blue": 0, "green": 0}


def host_port(url: str) -> tuple[str, int]:
    """The host and port of a URL from the config (http://127.0.0.1:8410 -> ("127.0.0.1", 8410))."""
    parts = urlsplit(url if "://" in url else f"tcp://{url}")
    if parts.port is None:
        raise ValueError(f"{url!r} names no port")
    return parts.hostname or "127.0.0.1", parts.port


def haproxy_dir(cfg: FleetConfig) -> Path:
    return cfg.state_dir() / "haproxy"


def global_socket(cfg: FleetConfig) -> str:
    tier = cfg.traffic.global_tier
    return tier.runtime_socket if isinstance(tier, HAProxyGlobal) else str(haproxy_dir(cfg) / "global.sock")


def global_backend(cfg: FleetConfig) -> str:
    tier = cfg.traffic.global_tier
    return tier.backend if isinstance(tier, HAProxyGlobal) else "global"


def region_socket(cfg: FleetConfig, region: RegionConfig) -> str:
    return region.gateway_runtime_socket or str(haproxy_dir(cfg) / f"{region.name}.sock")


def region_backend(cfg: FleetConfig) -> str:
    tier = cfg.traffic.regional_tier
    return tier.backend if isinstance(tier, HAProxyRegional) else "region"


def track_backend(track: str) -> str:
    return f"track_{track}"


def frontend(name: str) -> str:
    """A frontend's name: never a backend's too, which HAProxy 3.2 warns about and 3.3 refuses
    ("will not be supported anymore in version 3.3"); backend names come from the config."""
    return f"fe_{name}"


def _abstract_name(cfg: FleetConfig, region: str, track: str) -> str:
    # Abstract sockets share one namespace per machine; several stacks (tests, engineers) run at
    # once, so the name carries a hash of this stack's state dir.
    digest = hashlib.sha1(str(cfg.state_dir().resolve()).encode()).hexdigest()[:10]
    return f"drctl-{digest}-{region}-{track}"


_DEFAULTS = """\
defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout http-request 10s
"""


def _global_section(sock: str) -> str:
    return f"""\
global
    stats socket {sock} mode 600 level admin
    stats timeout 30s
    # The dev stack starts HAProxy as the user who runs it; no chroot or privilege drop.
"""


def render_global(cfg: FleetConfig) -> str:
    """haproxy/global.cfg: weighted region gateways with no checks, standing in for weighted DNS."""
    host, port = host_port(cfg.traffic.global_endpoint)
    stats_port = cfg.devstack.stats_port if cfg.devstack else 8404
    backend = global_backend(cfg)
    servers = []
    for r in cfg.regions:
        ghost, gport = host_port(r.gateway_url)
        servers.append(f"    server {r.name} {ghost}:{gport} weight {r.weight}")
    return "\n".join(
        [
            _global_section(global_socket(cfg)),
            _DEFAULTS,
            f"frontend {frontend('global')}",
            f"    bind {host}:{port}",
            f"    default_backend {backend}",
            "",
            f"backend {backend}",
            "    balance roundrobin",
            *_fast_path(cfg),
            *servers,
            "",
            "listen stats",
            f"    bind 127.0.0.1:{stats_port}",
            "    stats enable",
            "    stats uri /",
            "    stats refresh 5s",
            "",
        ]
    )


def _fast_path(cfg: FleetConfig) -> list[str]:
    """The global backend's retry lines: none by default, the fast path when it is configured.

    By default there are no health checks and no redispatch: only drctl moves traffic between
    regions, so a dead region shows up as errors until drctl shifts its weight away (what
    weighted DNS would do). With `traffic.global.fast_path`, a request that could not reach a
    region (refused or failed connect, empty response, 503) is sent once more to the other
    region: `redispatch 1` makes every retry pick another server, and `retry-on` extends the
    retry from connect failures to those layer-7 answers. A layer-7 retry replays the request,
    so HAProxy must hold all of it: `http-buffer-request` waits for the body (up to
    tune.bufsize) before it connects; without it a POST's 503 is passed to the user. Weights
    still decide where traffic goes; drctl still moves them.
    """
    tier = cfg.traffic.global_tier
    if not getattr(tier, "fast_path", False):
        return []
    return [
        "    retries 1",
        "    option redispatch 1",
        "    retry-on conn-failure empty-response 503",
        "    option http-buffer-request",
    ]


def partition_acl(cfg: FleetConfig, region: str) -> Path:
    """The region gateway's partition list: connections from these source addresses are refused
    (the dev stack's network-partition fault, `POST /faults/partition`)."""
    return haproxy_dir(cfg) / f"{region}-partition.acl"


def render_region(cfg: FleetConfig, region: str) -> str:
    """haproxy/<region>.cfg: the region gateway, its track servers and empty track backends."""
    r = cfg.region(region)
    host, port = host_port(r.gateway_url)
    backend = region_backend(cfg)
    lines = [
        _global_section(region_socket(cfg, r)),
        _DEFAULTS,
        f"frontend {frontend('gateway')}",
        f"    bind {host}:{port}",
        # The partition fault: a source address listed here (at runtime, `add acl`) is refused, as a
        # firewall between that client and the region would.
        f"    tcp-request connection reject if {{ src -f {partition_acl(cfg, region)} }}",
        # The regional tier names the region that served, as a production gateway is configured
        # to (traffic.region_header); verification reads this header and nothing the server sets.
        f"    http-response set-header {cfg.traffic.region_header} {r.name}",
        f"    default_backend {backend}",
        "",
        f"backend {backend}",
        "    balance roundrobin",
    ]
    for t in TRACKS:
        lines.append(f"    server {t} abns@{_abstract_name(cfg, region, t)} weight {TRACK_WEIGHTS[t]}")
    for t in TRACKS:
        lines += [
            "",
            f"frontend {frontend(track_backend(t))}",
            f"    bind abns@{_abstract_name(cfg, region, t)}",
            f"    default_backend {track_backend(t)}",
            "",
            f"backend {track_backend(t)}",
            "    balance roundrobin",
            # Replicas join at runtime (`add server ... check`), probed like a readiness probe;
            # a request that hits a replica killed a moment ago is retried on another one.
            "    option httpchk GET /health",
            "    retries 1",
            "    option redispatch 1",
        ]
    return "\n".join(lines) + "\n"
