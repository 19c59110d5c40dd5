"""HAProxy runtime API client over a unix socket (one command per connection)."""

from __future__ import annotations

import socket
from dataclasses import dataclass


class HAProxyError(RuntimeError):
    """HAProxy refused a command or could not be reached."""


@dataclass(frozen=True)
class ServerState:
    backend: str
    name: str
    address: str
    port: int
    weight: int
    operational: bool  # srv_op_state == 2 (running)
    admin_maint: bool  # administratively in maintenance


class HAProxyRuntime:
    def __init__(self, socket_path: str, timeout_s: float = 2.0) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s

    def command(self, cmd: str) -> str:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout_s)
                s.connect(self.socket_path)
                s.sendall(cmd.encode() + b"\n")
                chunks = []
                while True:
                    data = s.recv(65536)
                    if not data:
                        break
                    chunks.append(data)
        except OSError as exc:
            raise HAProxyError(f"HAProxy runtime API at {self.socket_path} unreachable: {exc}") from exc
        out = b"".join(chunks).decode(errors="replace")
        low = out.lower()
        if any(m in low for m in ("unknown command", "no such", "require", "not found", "invalid", "error")):
            if not low.startswith("#"):  # `show` output starts with a header and may contain these words
                raise HAProxyError(f"HAProxy rejected {cmd!r}: {out.strip()}")
        return out

    def servers(self, backend: str) -> list[ServerState]:
        out = self.command(f"show servers state {backend}")
        lines = [ln for ln in out.splitlines() if ln and not ln.startswith("#") and not ln.startswith("1")]
        result = []
        # Format (version 1): be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state
        #   srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result ...
        #   srv_port is field 18.
        for ln in lines:
            f = ln.split()
            if len(f) < 19 or f[1] != backend:
                continue
            result.append(
                ServerState(
                    backend=f[1],
                    name=f[3],
                    address=f[4],
                    port=int(f[18]) if f[18].isdigit() else 0,
                    weight=int(f[7]),
                    operational=f[5] == "2",
                    admin_maint=(int(f[6]) & 0x1) != 0 or (int(f[6]) & 0x20) != 0,
                )
            )
        return result

    def get_weights(self, backend: str) -> dict[str, int]:
        return {s.name: s.weight for s in self.servers(backend)}

    def set_weight(self, backend: str, server: str, weight: int) -> None:
        if not 0 <= weight <= 256:
            raise ValueError(f"HAProxy weight must be 0..256, got {weight}")
        self.command(f"set weight {backend}/{server} {weight}")

    def add_server(self, backend: str, server: str, address: str, port: int, *, check_path: str | None) -> None:
        opts = f" check inter 1s fall 1 rise 1" if check_path else ""
        self.command(f"add server {backend}/{server} {address}:{port}{opts}")
        if check_path:
            self.command(f"enable health {backend}/{server}")
        self.command(f"enable server {backend}/{server}")

    def del_server(self, backend: str, server: str) -> None:
        self.command(f"disable server {backend}/{server}")
        self.command(f"shutdown sessions server {backend}/{server}")
        self.command(f"del server {backend}/{server}")
