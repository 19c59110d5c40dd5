"""Record HAProxy runtime-API transcripts from a real HAProxy binary, or derive one from the source.

    python -m tests.providers.transcripts.record /usr/sbin/haproxy
    python -m tests.providers.transcripts.record ../shared/tools/haproxy-3.2/haproxy
    python -m tests.providers.transcripts.record --derive v2.8.0 --from 2.6 --source /path/to/haproxy.git
    python -m tests.providers.transcripts.record --derive v3.0.0 --from 3.2 --source /path/to/haproxy.git

Recording starts the binary on a throwaway config (backends only, servers on unreachable loopback
ports), sends each command of SCRIPT on its own connection as drctl's client does, and writes the
raw replies to haproxy-<major.minor>/runtime.json. It also records one line of several commands in
prompt mode, which shows the separator each release prints between them.

Deriving (for releases with no binary here) takes the recorded replies of the nearest recorded
release and rebuilds, from the upstream source at the tag, what that tag prints differently: the
`show stat` CSV header (the stat field table, in order), the unknown-command line, the `del server`
message and the prompts between pipelined commands.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
ADD = "add server track_stable/r1 127.0.0.1:1 check inter 1000ms fall 2 rise 1"
SCRIPT = [
    "show servers state global",
    "get weight global/us-west-1",
    "set weight global/us-west-1 10",
    "show servers state global",
    "set weight global/nope 1",
    "set weight hashed/b 50",
    "show servers state nope",
    "frobnicate all",
    ADD,
    ADD,
    "enable health track_stable/r1",
    "set server track_stable/r1 state ready",
    "show servers state track_stable",
    "set server track_stable/r1 state maint",
    "shutdown sessions server track_stable/r1",
    "del server track_stable/r1",
    "del server track_stable/r1",
    "clear acl {acl}",
    "add acl {acl} 192.0.2.7",
    "show stat -1 2 -1",
]
PIPELINED = "prompt; get weight global/us-west-1; get weight global/us-east-1; quit"

CONFIG = """\
global
    stats socket {sock} mode 600 level admin
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
frontend fe_in
    bind unix@{fe}
    tcp-request connection reject if {{ src -f {acl} }}
    default_backend global
backend global
    balance roundrobin
    server us-west-1 127.0.0.1:1 weight 60
    server us-east-1 127.0.0.1:2 weight 40
backend hashed
    balance source
    server a 127.0.0.1:3 weight 1
    server b 127.0.0.1:4 weight 1
backend track_stable
    balance roundrobin
    option httpchk GET /health
"""


def _exchange(sock: str, line: str) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(sock)
        s.sendall(line.encode() + b"\n")
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    return b"".join(chunks).decode()


def record(binary: str) -> Path:
    version = subprocess.run([binary, "-v"], capture_output=True, text=True, check=True).stdout.splitlines()[
        0
    ]
    short = re.search(r"version (\d+\.\d+)", version)
    assert short, version
    with tempfile.TemporaryDirectory() as tmp:
        sock, acl, cfg = f"{tmp}/admin.sock", f"{tmp}/partition.acl", Path(tmp) / "haproxy.cfg"
        Path(acl).write_text("")
        cfg.write_text(CONFIG.format(sock=sock, acl=acl, fe=f"{tmp}/fe.sock"))
        proc = subprocess.Popen(
            [binary, "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            for _ in range(100):
                if Path(sock).exists() or proc.poll() is not None:
                    break
                time.sleep(0.05)
            if not Path(sock).exists():
                raise SystemExit(
                    f"{binary} did not start: {proc.stderr.read().decode() if proc.stderr else ''}"
                )
            exchanges = []
            for cmd in SCRIPT:
                exchanges.append(
                    {"send": cmd, "reply": _exchange(sock, cmd.format(acl=acl)).replace(acl, "{acl}")}
                )
            pipelined = {"send": PIPELINED, "reply": _exchange(sock, PIPELINED)}
        finally:
            proc.terminate()
            proc.wait(10)
    out = HERE / f"haproxy-{short.group(1)}" / "runtime.json"
    out.parent.mkdir(exist_ok=True)
    doc = {
        "haproxy": version,
        "source": f"recorded from the real binary {binary} by tests/providers/transcripts/record.py",
        "mode": "one command per connection (non-interactive); `pipelined` is one prompt-mode line",
        "exchanges": exchanges,
        "pipelined": pipelined,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return out


def _stat_fields(repo: str, tag: str) -> list[str]:
    """The `show stat` CSV columns at a tag: the proxy stat table of src/stats.c (2.x) or
    src/stats-proxy.c (3.x), in the order HAProxy prints it."""
    for path, table in (("src/stats-proxy.c", "stat_cols_px"), ("src/stats.c", "stat_fields")):
        text = subprocess.run(
            ["git", "-C", repo, "show", f"{tag}:{path}"], capture_output=True, text=True
        ).stdout
        body = re.search(rf"\b{table}\[[A-Z_]+\] = \{{(.*?)\n\}};", text, re.S)
        if body:
            # `{ .name = "pxname", ... }` entries, and 3.x's `ME_NEW_PX("stot", ...)` macros.
            return re.findall(r'(?:\.name\s*=\s*|ME_NEW_\w+\()"([a-z0-9_]+)"', body.group(1))
    raise SystemExit(f"no stat field table at {tag}")


def _git_show(repo: str, tag: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], capture_output=True, text=True).stdout


def _rebuild(ex: dict[str, str], repo: str, tag: str, fields: list[str]) -> None:
    """Rewrite one recorded reply where the source at `tag` prints something else than the base."""
    send, reply = ex["send"], ex["reply"]
    if send.startswith("show stat"):
        lines = reply.rstrip("\n").split("\n")
        cols = lines[0][2:].split(",")
        rows = [dict(zip(cols, ln.split(","), strict=False)) for ln in lines[1:]]
        csv = ["# " + ",".join(fields) + ","] + [",".join(r.get(f, "") for f in fields) + "," for r in rows]
        ex["reply"] = "\n".join(csv) + "\n\n"
    elif send == "frobnicate all":
        # src/cli.c: 2.8 and later quote the word ("Unknown command: 'frobnicate', but maybe ...").
        quoted = 'chunk_strcat(tmp, "Unknown command: \'");' in _git_show(repo, tag, "src/cli.c")
        first = (
            "Unknown command: 'frobnicate', but maybe one of the following ones is a better match:"
            if quoted
            else "Unknown command, but maybe one of the following ones is a better match:"
        )
        ex["reply"] = first + reply[reply.index("\n") :]
    elif send.startswith("del server") and reply.startswith("Server deleted."):
        # src/server.c: 3.0 and later end the message with its own newline, before the CLI's.
        own = 'cli_msg(appctx, LOG_INFO, "Server deleted.\\n");' in _git_show(repo, tag, "src/server.c")
        ex["reply"] = "Server deleted.\n" + ("\n" if own else "")


def derive(tag: str, base: str, repo: str) -> Path:
    doc = json.loads((HERE / f"haproxy-{base}" / "runtime.json").read_text())
    fields = _stat_fields(repo, tag)
    for ex in doc["exchanges"]:
        _rebuild(ex, repo, tag, fields)
    if "we are executing pipelined commands, don't display the prompt" in _git_show(repo, tag, "src/cli.c"):
        raise SystemExit(f"{tag} prints a bare newline between pipelined commands; record it instead")
    # Before 3.2 a prompt follows every command of a line (src/cli.c, the post-command prompt).
    # The line is sent after SCRIPT, so it reads the weights the last `show servers state global` shows.
    state = [ex["reply"] for ex in doc["exchanges"] if ex["send"] == "show servers state global"][-1]
    now = {r.split()[3]: r.split()[7] for r in state.strip().splitlines()[2:]}
    doc["pipelined"]["reply"] = "\n> " + "".join(
        f"{now[s]} (initial {i})\n\n> " for s, i in (("us-west-1", 60), ("us-east-1", 40))
    )
    short = re.match(r"v(\d+\.\d+)", tag)
    assert short, tag
    doc["haproxy"] = f"HAProxy version {tag[1:]} (derived, no binary run)"
    doc["source"] = (
        f"derived from the upstream source at tag {tag}: the replies of haproxy-{base}, with what the "
        f"source at {tag} prints differently rebuilt from it: the `show stat` header (its stat field "
        f"table; values carried by name, stats-module columns left out), the unknown-command line "
        f"(src/cli.c), the `del server` message (src/server.c) and the pipelined prompts (src/cli.c). "
        f"`show servers state` fields (include/haproxy/server-t.h) and the other messages are the same"
    )
    out = HERE / f"haproxy-{short.group(1)}" / "runtime.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?")
    ap.add_argument("--derive", metavar="TAG")
    ap.add_argument("--from", dest="base", default="2.6")
    ap.add_argument("--source", help="a clone of the haproxy repository")
    args = ap.parse_args()
    out = derive(args.derive, args.base, args.source) if args.derive else record(args.binary)
    print(out, file=sys.stderr)


if __name__ == "__main__":
    main()
