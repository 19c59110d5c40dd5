"""Render the dev stack's HAProxy configs: the global tier and one gateway per region.

Only the topology lives in the files. Weights the product sets and the replicas the node agent
adds are runtime state, changed over the runtime API sockets named here. A restart keeps the
weights the way a production HAProxy's reload does: `show servers state` is written to the
config's `server-state-file` first, and the new process loads it (`load-server-state-from-file`).

Health, from the replicas up (docs/devstack.md, "Data-plane health"):
- a replica is checked with GET /health (engine health in vLLM, not counted as a request);
- a track server of the region backend is checked against its track backend: up while it has a
  ready replica (nbsrv);
- the region gateway answers GET /drctl/ready with 200 while a weighted track is up, else 503;
- the global backend checks each region gateway's /drctl/ready (traffic.global.health_checks).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit

from drctl.config.schema import TRACKS, FleetConfig, HAProxyGlobal, HAProxyRegional, RegionConfig

# Weights of the region backend's track servers at start: all traffic on stable.
TRACK_WEIGHTS = {"stable": 100, "canary": 0, "blue": 0, "green": 0}

# The region gateway's inference health endpoint: 200 while a track that carries weight has a
# ready replica, 503 otherwise. Answered by the gateway itself, so checking it costs no replica a
# request (the replicas' own checks are what it sums up).
READY_PATH = "/drctl/ready"
# A track frontend's readiness, checked by the region backend's track server over its abns socket.
TRACK_READY_PATH = "/drctl/track-ready"
# Track server checks stay inside one HAProxy and only read nbsrv, already filtered by the
# replicas' own fall/rise: check every second and follow at once, so they add no detection delay.
# A down track is checked every 250 ms, so a track whose first replica just joined takes traffic
# at once when drctl weights it (an upgrade's first step), not up to a second later.
_TRACK_CHECK = "check inter 1s downinter 250ms fall 1 rise 1"


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


def state_file(cfg: FleetConfig, name: str) -> Path:
    """haproxy/<name>.state: the servers' state (weights among it) a restarted HAProxy loads."""
    return haproxy_dir(cfg) / f"{name}.state"


def save_state(reply: str, path: Path) -> None:
    """Write `reply`, what the runtime API answered to `show servers state`, to `path`.

    HAProxy's documented reload procedure: dump the state, then start the new process, which
    reads it through `load-server-state-from-file`. Written to a temporary name and renamed, so a
    process starting meanwhile never reads half a file.
    """
    tmp = path.with_suffix(".state.tmp")
    tmp.write_text(reply if reply.endswith("\n") else reply + "\n")
    tmp.replace(path)


def fresh_state_file(path: Path) -> None:
    """A state file with no server in it (only the format version), for a first start: it starts
    from the config's weights, and HAProxy warns about a state file it cannot open or that has no
    version line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("1\n")


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


def _global_section(sock: str, state: Path) -> str:
    return f"""\
global
    stats socket {sock} mode 600 level admin
    stats timeout 30s
    # Written from `show servers state` before a restart; read back by the backends that say
    # `load-server-state-from-file global`, so runtime weights survive the restart.
    server-state-file {state}
    # The dev stack starts HAProxy as the user who runs it; no chroot or privilege drop.
"""


def render_global(cfg: FleetConfig) -> str:
    """haproxy/global.cfg: the weighted region gateways, each checked on its readiness endpoint."""
    host, port = host_port(cfg.traffic.global_endpoint)
    stats_port = cfg.devstack.stats_port if cfg.devstack else 8404
    backend = global_backend(cfg)
    check = _gateway_check(cfg)
    servers = []
    for r in cfg.regions:
        ghost, gport = host_port(r.gateway_url)
        servers.append(f"    server {r.name} {ghost}:{gport} weight {r.weight}{check}")
    return "\n".join(
        [
            _global_section(global_socket(cfg), state_file(cfg, "global")),
            _DEFAULTS,
            f"frontend {frontend('global')}",
            f"    bind {host}:{port}",
            f"    default_backend {backend}",
            "",
            f"backend {backend}",
            "    balance roundrobin",
            "    load-server-state-from-file global",
            *([f"    option httpchk GET {READY_PATH}", "    http-check expect status 200"] if check else []),
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


def _gateway_check(cfg: FleetConfig) -> str:
    """The global servers' check options (traffic.global.health_checks), or "" without checks.

    A region whose gateway fails `check_fall` checks in a row leaves the rotation by itself (its
    weight stays what drctl set); `check_rise` passes bring it back.
    """
    tier = cfg.traffic.global_tier
    if not isinstance(tier, HAProxyGlobal) or not tier.health_checks:
        return ""
    inter_ms = max(1, round(tier.check_interval_s * 1000))
    return f" check inter {inter_ms}ms fall {tier.check_fall} rise {tier.check_rise}"


def _fast_path(cfg: FleetConfig) -> list[str]:
    """The global backend's retry lines: the fast path unless it is turned off.

    Without it (and without health checks) only drctl moves traffic between regions, so a dead
    region shows up as errors until drctl shifts its weight away (what weighted DNS without
    health checks would do). With `traffic.global.fast_path` (the default), a request that could not reach a
    region (refused or failed connect, empty response, 503) is sent once more to the other
    region: `redispatch 1` makes every retry pick another server, and `retry-on` extends the
    retry from connect failures to those layer-7 answers. A layer-7 retry replays the request,
    so HAProxy must hold all of it: `http-buffer-request` waits for the body (up to
    tune.bufsize) before it connects; without it a POST's 503 is passed to the user. Weights
    still decide where traffic goes; drctl still moves them.
    """
    tier = cfg.traffic.global_tier
    if not isinstance(tier, HAProxyGlobal) or not tier.fast_path:
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
        _global_section(region_socket(cfg, r), state_file(cfg, region)),
        _DEFAULTS,
        f"frontend {frontend('gateway')}",
        f"    bind {host}:{port}",
        # The partition fault: a source address listed here (at runtime, `add acl`) is refused, as a
        # firewall between that client and the region would.
        f"    tcp-request connection reject if {{ src -f {partition_acl(cfg, region)} }}",
        # The inference health endpoint the global tier checks: a usable server of the region
        # backend is a track with weight whose track backend has a ready replica.
        f'    http-request return status 200 content-type text/plain string "ready" '
        f"if {{ path {READY_PATH} }} {{ nbsrv({backend}) gt 0 }}",
        f'    http-request return status 503 content-type text/plain string "no ready replica" '
        f"if {{ path {READY_PATH} }}",
        # The regional tier names the region that served, as a production gateway is configured
        # to (traffic.region_header); verification reads this header and nothing the server sets.
        f"    http-response set-header {cfg.traffic.region_header} {r.name}",
        f"    default_backend {backend}",
        "",
        f"backend {backend}",
        "    balance roundrobin",
        # The track weights drctl set come back from the state file after a restart.
        "    load-server-state-from-file global",
        f"    option httpchk GET {TRACK_READY_PATH}",
        "    http-check expect status 200",
    ]
    for t in TRACKS:
        name = _abstract_name(cfg, region, t)
        lines.append(f"    server {t} abns@{name} weight {TRACK_WEIGHTS[t]} {_TRACK_CHECK}")
    for t in TRACKS:
        tb = track_backend(t)
        lines += [
            "",
            f"frontend {frontend(tb)}",
            f"    bind abns@{_abstract_name(cfg, region, t)}",
            f"    http-request return status 200 if {{ path {TRACK_READY_PATH} }} {{ nbsrv({tb}) gt 0 }}",
            f"    http-request return status 503 if {{ path {TRACK_READY_PATH} }}",
            f"    default_backend {tb}",
            "",
            f"backend {track_backend(t)}",
            "    balance roundrobin",
            # Replicas join at runtime (`add server ... check`), probed like a readiness probe;
            # a request that hits a replica killed a moment ago (refused, or closed with no
            # answer, as a replica stopped by a scale-down mid-request) is retried on another
            # one; without `empty-response` the gateway answered that request 502. The retry
            # replays the request, so the body is buffered first.
            "    option httpchk GET /health",
            "    retries 1",
            "    option redispatch 1",
            "    retry-on conn-failure empty-response",
            "    option http-buffer-request",
        ]
    return "\n".join(lines) + "\n"
