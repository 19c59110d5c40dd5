"""HAProxy runtime API client over the stats unix socket (`level admin`), for HAProxy 2.6 to 3.2.

One command per connection, in HAProxy's default (non-interactive) mode: HAProxy runs the command,
writes its reply and closes the connection, so the reply is exactly what came before the close.
Nothing depends on what HAProxy prints between commands: since v3.2.0, several commands sent on
one line in prompt mode are separated by a bare "\\n" instead of "\\n> " (src/cli.c, the
`APPCTX_CLI_ST1_LASTCMD` test), and messages such as "Server deleted." carry no newline of their
own, so a line of several commands cannot be split per command on every release. A unix-socket
connect costs tens of microseconds, and HAProxy yields between pipelined commands anyway, so
a batch was never atomic: nothing is lost by sending commands one by one.

How each reply is judged (success, refusal, or a reply whose effect is unknown) is in
haproxy_replies.py.
"""

from __future__ import annotations

import re
import socket
import time

from drctl.providers.haproxy_replies import (
    HAProxyBadReply,
    HAProxyError,
    ServerState,
    judge,
    parse_servers_state,
)

__all__ = ["HAProxyBadReply", "HAProxyError", "HAProxyRuntime", "ServerState", "judge", "parse_servers_state"]

# The CLI reads a command line into one buffer (tune.bufsize, 16 kB by default); stay well below.
_MAX_LINE_BYTES = 8000

# `del server` refusals that clear once connections drain.
_DEL_BUSY = re.compile(r"still has|connections attached|queue", re.I)


def _check_command(cmd: str) -> None:
    if not cmd.strip() or any(c in cmd for c in ";\n\r"):
        raise ValueError(f"not a single runtime API command: {cmd!r}")
    if len(cmd.encode()) > _MAX_LINE_BYTES:
        raise ValueError(f"runtime API command too long ({len(cmd)} bytes): {cmd[:80]!r}...")


class HAProxyRuntime:
    """Runtime API of one HAProxy process."""

    def __init__(self, socket_path: str, timeout_s: float = 2.0) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s

    # --- transport ------------------------------------------------------------------------------

    def _exchange(self, line: str) -> str:
        deadline = time.monotonic() + self.timeout_s
        chunks: list[bytes] = []
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout_s)
                s.connect(self.socket_path)
                s.sendall(line.encode() + b"\n")
                while True:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"no complete reply within {self.timeout_s}s")
                    data = s.recv(65536)
                    if not data:
                        break
                    chunks.append(data)
        except TimeoutError as exc:
            raise HAProxyError(
                f"HAProxy runtime API at {self.socket_path} did not answer within {self.timeout_s:g}s: {exc}"
            ) from exc
        except OSError as exc:
            raise HAProxyError(f"HAProxy runtime API at {self.socket_path} unreachable: {exc}") from exc
        return b"".join(chunks).decode(errors="replace")

    def raw_command(self, cmd: str) -> str:
        """Send one command in its own connection; return the reply as sent, unchecked."""
        _check_command(cmd)
        return self._exchange(cmd)

    def _bad_reply(self, cmd: str, reply: str) -> HAProxyBadReply:
        return HAProxyBadReply(
            f"HAProxy runtime API at {self.socket_path} gave a reply to {cmd!r} that cannot be parsed "
            f"(cut short, or not an HAProxy admin socket?), so the command's effect is unknown: {reply[:300]!r}",
            command=cmd,
            reply=reply,
        )

    def commands(self, cmds: list[str]) -> list[str]:
        """Run several commands one after the other; raise if any was refused or answered oddly.

        HAProxy has no transactions: every command is sent even after a refusal, so the caller
        learns about every refusal (all are named in the error) and decides how to compensate.
        A reply that cannot be parsed raises HAProxyBadReply: that command's effect is unknown.
        """
        for cmd in cmds:
            _check_command(cmd)
        replies = [self.raw_command(c) for c in cmds]
        verdicts = [judge(c, r) for c, r in zip(cmds, replies, strict=True)]
        for cmd, reply, verdict in zip(cmds, replies, verdicts, strict=True):
            if verdict == "unknown":
                raise self._bad_reply(cmd, reply)
        failed = [(c, r.strip()) for c, r, v in zip(cmds, replies, verdicts, strict=True) if v == "refused"]
        if failed:
            detail = "; ".join(f"{c!r}: {r}" for c, r in failed)
            raise HAProxyError(
                f"HAProxy at {self.socket_path} refused {detail}", command=failed[0][0], reply=failed[0][1]
            )
        return [r.strip("\n") for r in replies]

    def command(self, cmd: str) -> str:
        return self.commands([cmd])[0]

    # --- servers --------------------------------------------------------------------------------

    def servers(self, backend: str) -> list[ServerState]:
        reply = self.command(f"show servers state {backend}")
        try:
            return parse_servers_state(reply, backend)
        except HAProxyBadReply as exc:
            raise HAProxyBadReply(f"HAProxy runtime API at {self.socket_path}: {exc}", reply=reply) from exc

    def get_weights(self, backend: str) -> dict[str, int]:
        return {s.name: s.weight for s in self.servers(backend)}

    def set_weights(self, backend: str, weights: dict[str, int]) -> None:
        """Set several server weights in one connection; on a refusal, restore the earlier ones."""
        for server, w in weights.items():
            if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= 256:
                raise ValueError(f"{server}: HAProxy weight must be an integer 0..256, got {w!r}")
        before = self.get_weights(backend)
        missing = sorted(set(weights) - set(before))
        if missing:
            raise HAProxyError(
                f"backend {backend!r} at {self.socket_path} has no server {', '.join(missing)}"
            )
        cmds = [f"set weight {backend}/{s} {w}" for s, w in weights.items()]
        replies = [self.raw_command(c) for c in cmds]
        verdicts = [judge(c, r) for c, r in zip(cmds, replies, strict=True)]
        if "unknown" in verdicts:
            self._settle_unknown(backend, weights, cmds, replies, verdicts)
            return
        if all(v == "ok" for v in verdicts):
            return
        bad = [(c, r.strip()) for c, r, v in zip(cmds, replies, verdicts, strict=True) if v != "ok"]
        refused = "; ".join(f"{c!r}: {r}" for c, r in bad)
        # Partial application would leave a mix nobody asked for: put back what was there.
        try:
            self.commands([f"set weight {backend}/{s} {before[s]}" for s in weights])
        except HAProxyError as exc:
            raise HAProxyError(
                f"HAProxy at {self.socket_path} refused {refused}; restoring the earlier weights failed too: {exc}",
                command=bad[0][0],
                reply=bad[0][1],
            ) from exc
        raise HAProxyError(
            f"HAProxy at {self.socket_path} refused {refused}; earlier weights restored",
            command=bad[0][0],
            reply=bad[0][1],
        )

    def _settle_unknown(
        self, backend: str, weights: dict[str, int], cmds: list[str], replies: list[str], verdicts: list[str]
    ) -> None:
        """Some `set weight` got a reply that tells neither success nor refusal: read the weights back.

        Returns if every asked weight is in place; otherwise raises HAProxyBadReply naming what the
        backend has now, so the caller (and its retry) decides from facts, not from the odd reply.
        """
        odd = next((c, r) for c, r, v in zip(cmds, replies, verdicts, strict=True) if v == "unknown")
        try:
            now = self.get_weights(backend)
        except HAProxyError as exc:
            raise HAProxyBadReply(
                f"{self._bad_reply(*odd)}; reading the weights back failed too, so they are unknown: {exc}",
                command=odd[0],
                reply=odd[1],
            ) from exc
        if all(now.get(s) == w for s, w in weights.items()):
            return
        raise HAProxyBadReply(
            f"{self._bad_reply(*odd)}; read back, backend {backend!r} has weights {now}, not {weights}",
            command=odd[0],
            reply=odd[1],
        )

    def set_weight(self, backend: str, server: str, weight: int) -> None:
        self.set_weights(backend, {server: weight})

    def add_server(
        self,
        backend: str,
        server: str,
        address: str,
        port: int,
        *,
        check: bool = True,
        weight: int | None = None,
        inter_ms: int = 1000,
        fall: int = 2,
        rise: int = 1,
    ) -> None:
        """Add a dynamic server and put it in service.

        Dynamic servers start in maintenance with checks off. The check itself (e.g. `GET /health`)
        is whatever the backend's `option httpchk` says; without it, a TCP connect check.
        """
        spec = f"add server {backend}/{server} {address}:{port}"
        if weight is not None:
            spec += f" weight {weight}"
        if check:
            spec += f" check inter {inter_ms}ms fall {fall} rise {rise}"
        # The add first, on its own: if the name already exists, the enables that follow must not
        # touch the existing server (which may be in maintenance on purpose).
        try:
            self.command(spec)
        except HAProxyBadReply:
            # Effect unknown: the server exists now, at this address, or the add did not happen.
            if not any(
                s.name == server and (s.address, s.port) == (address, port) for s in self.servers(backend)
            ):
                raise
        self.commands(
            ([f"enable health {backend}/{server}"] if check else [])
            + [f"set server {backend}/{server} state ready"]
        )

    def del_server(
        self,
        backend: str,
        server: str,
        *,
        grace_s: float = 0.0,
        timeout_s: float = 5.0,
        missing_ok: bool = False,
    ) -> None:
        """Take a server out of service and delete it once no connection is left.

        In maintenance it takes no new request; the streams it is serving may finish for up to
        `grace_s` (a pod's termination grace, with its endpoint gone). What is left then is cut.
        """
        try:
            self.command(f"set server {backend}/{server} state maint")
        except HAProxyError as exc:
            if missing_ok and "No such server" in (exc.reply or ""):
                return
            raise
        if self._try_del(backend, server, time.monotonic() + grace_s):
            return
        self.command(f"shutdown sessions server {backend}/{server}")
        if not self._try_del(backend, server, time.monotonic() + timeout_s):
            # Killed sessions and idle connections are released asynchronously; one last word.
            self.command(f"del server {backend}/{server}")

    def _try_del(self, backend: str, server: str, deadline: float) -> bool:
        """`del server` until it is done (True) or `deadline` passes while it stays busy (False)."""
        while True:
            try:
                self.command(f"del server {backend}/{server}")
                return True
            except HAProxyError as exc:
                if not _DEL_BUSY.search(exc.reply or ""):
                    raise
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
