"""What HAProxy's runtime API answers, 2.6 to 3.2: success texts, errors, `show servers state`.

HAProxy reports errors as free text, so a reply is judged by what success looks like for each
command (2.6 to 3.2 print the same texts: src/server.c at each tag): a known error is a refusal,
anything else that is not the success text is a bad reply whose effect is unknown. Every reply
ends with the newline HAProxy prints after a command; a reply without it was cut short.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Commands whose only successful reply is empty (2.6 to 3.2 print nothing on success).
_SILENT = re.compile(
    r"^(set weight |set server \S+ (state|weight) |enable (server|health|agent) |"
    r"disable (server|health|agent) |shutdown sessions server |set maxconn server |clear acl |add acl )"
)
# Commands with a fixed success reply.
_EXPECT: list[tuple[re.Pattern[str], re.Pattern[str]]] = [
    (re.compile(r"^add server "), re.compile(r"New server registered\.")),
    (re.compile(r"^del server "), re.compile(r"Server deleted\.")),
    (re.compile(r"^get weight "), re.compile(r"\d+ \(initial \d+\)")),
    (re.compile(r"^show servers state"), re.compile(r"1\n# be_id .*", re.S)),
]
# The first words of HAProxy's error messages (2.6 to 3.2).
_ERROR_START = re.compile(
    r"^(Unknown command|No such|Can't find|Permission denied|Require|Missing|Invalid|Absolute weight|"
    r"Relative weight|Only servers|Server still|unknown keyword|Backend is using|Empty weight|"
    r"This command is restricted|This server|Already exists)",
    re.I,
)

# srv_admin_state flags (src/server.h): FMAINT|IMAINT|CMAINT|RMAINT|HMAINT, and FDRAIN|IDRAIN.
_ADMIN_MAINT = 0x01 | 0x02 | 0x04 | 0x20 | 0x40
_ADMIN_DRAIN = 0x08 | 0x10
_CHECK_RESULTS = {"0": "unknown", "1": "neutral", "2": "failed", "3": "passed", "4": "condpass"}


class HAProxyError(RuntimeError):
    """HAProxy refused a command or could not be reached."""

    def __init__(self, message: str, *, command: str | None = None, reply: str | None = None) -> None:
        super().__init__(message)
        self.command = command
        self.reply = reply


class HAProxyBadReply(HAProxyError):
    """The socket answered, but not as HAProxy's runtime API does: a reply cut short (HAProxy
    reloading), a socket that is not HAProxy's admin socket, or a text this client does not know.
    The command's effect is unknown: callers re-read the state, never assume it applied or failed."""


@dataclass(frozen=True)
class ServerState:
    """One row of `show servers state`."""

    backend: str
    name: str
    address: str
    port: int
    weight: int  # srv_uweight: what `set weight` sets
    initial_weight: int  # srv_iweight: the weight from the config file
    operational: bool  # srv_op_state == 2 (running)
    admin_maint: bool  # in maintenance for any reason (forced, inherited, config, resolution, health)
    draining: bool
    check_result: str  # unknown, neutral, failed, passed, condpass


def judge(cmd: str, reply: str) -> str:
    """ "ok", "refused" (HAProxy said no) or "unknown" (a reply that tells neither) for one reply."""
    if not reply.endswith("\n"):
        return "unknown"  # cut short: HAProxy ends every reply with a newline before it closes
    text = reply.strip("\n")
    if _ERROR_START.match(text):
        return "refused"
    if _SILENT.match(cmd):
        return "ok" if text == "" else "unknown"
    for pattern, ok in _EXPECT:
        if pattern.match(cmd):
            return "ok" if ok.fullmatch(text) else "unknown"
    return "ok"


def parse_servers_state(reply: str, backend: str | None = None) -> list[ServerState]:
    """Parse `show servers state` output (format version 1), by the column names in its header."""
    lines = reply.strip("\n").splitlines()
    if len(lines) < 2 or lines[0].strip() != "1" or not lines[1].startswith("# "):
        raise HAProxyBadReply(f"unexpected `show servers state` output: {reply[:200]!r}", reply=reply)
    cols = lines[1][2:].split()
    out: list[ServerState] = []
    for line in lines[2:]:
        if not line.strip():
            continue
        row = dict(zip(cols, line.split(), strict=False))
        if backend is not None and row.get("be_name") != backend:
            continue
        try:
            admin = int(row["srv_admin_state"])
            port = row.get("srv_port", "0")
            out.append(
                ServerState(
                    backend=row["be_name"],
                    name=row["srv_name"],
                    address=row["srv_addr"],
                    port=int(port) if port.isdigit() else 0,
                    weight=int(row["srv_uweight"]),
                    initial_weight=int(row["srv_iweight"]),
                    operational=row["srv_op_state"] == "2",
                    admin_maint=bool(admin & _ADMIN_MAINT),
                    draining=bool(admin & _ADMIN_DRAIN),
                    check_result=_CHECK_RESULTS.get(row.get("srv_check_result", "0"), "unknown"),
                )
            )
        except (KeyError, ValueError) as exc:
            raise HAProxyBadReply(
                f"unparsable `show servers state` row {line!r}: {exc}", reply=reply
            ) from exc
    return out
