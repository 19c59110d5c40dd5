"""Process and port plumbing for the dev stack: pid files, ownership checks, detached spawns, kills.

The stack only ever signals processes it can prove it started: a pid file alone is not enough,
because pids are recycled, so the live process's /proc cmdline must end with the argv we recorded.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path


def port_open(port: int, host: str = "127.0.0.1", timeout_s: float = 0.3) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def port_bindable(port: int, host: str = "127.0.0.1") -> bool:
    """True when nobody listens on host:port (a connect-only check misses half-started servers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_holder(port: int) -> str:
    """Who listens on a loopback TCP port, as " (pid N: argv...)" for an error message, or "".

    Read from /proc/net/tcp (the socket's inode) and /proc/*/fd (which process holds that inode);
    processes of other users are not readable and give "".
    """
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local_address is HEXIP:HEXPORT; state 0A is LISTEN; field 9 is the inode.
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return ""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in inodes:
                    return f" (pid {entry.name}: {' '.join(cmdline(int(entry.name)))[:200]})"
            except OSError:
                continue
    return ""


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _reap(pid: int) -> None:
    # A process we spawned from this interpreter (tests) stays a zombie until waited for, and a
    # zombie still answers kill(pid, 0): reap it so it reads as dead.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def pid_alive(pid: int) -> bool:
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # Field 3, after the parenthesised command name (which may itself contain spaces).
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def is_ours(pid: int, argv: list[str]) -> bool:
    """The live process `pid` runs `argv` (interpreters may prepend themselves, so compare the tail)."""
    if not argv or not pid_alive(pid):
        return False
    cmd = cmdline(pid)
    tail = argv[1:]
    if len(cmd) < len(tail) or (tail and cmd[len(cmd) - len(tail) :] != tail):
        return False
    exe = os.path.basename(argv[0])
    return any(os.path.basename(c) == exe for c in cmd[: len(cmd) - len(tail)])


def spawn(argv: list[str], log_path: Path, pid_path: Path, env: dict[str, str] | None = None) -> int:
    """Start argv detached from our session, output appended to log_path; write its pid file."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    pid_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        log.flush()
        # start_new_session: the stack outlives the shell (and the `drctl dev up` process) that
        # started it, and a Ctrl-C in that terminal does not reach it.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    pid_path.write_text(f"{proc.pid}\n")
    return proc.pid


def terminate(pids: Iterable[int], timeout_s: float = 10.0) -> list[int]:
    """SIGTERM each pid, wait up to timeout_s, then SIGKILL the stragglers and their process groups.

    Returns the pids that needed SIGKILL.
    """
    pids = [p for p in pids if pid_alive(p)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)
    killed = [p for p in pids if pid_alive(p)]
    for pid in killed:
        # Each was started as a session leader, so its pid is its process group: killing the group
        # also takes down the children a wedged process can no longer stop.
        for sender in (os.killpg, os.kill):
            try:
                sender(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)
    return killed


def pids_mentioning(text: str, exclude: Iterable[int] = ()) -> list[int]:
    """Live processes of our uid whose cmdline contains `text` (a state-dir path, unique per stack)."""
    skip = set(exclude) | _ancestors()
    uid = os.getuid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid in skip:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
        except OSError:
            continue
        if any(text in arg for arg in cmdline(pid)) and pid_alive(pid):
            found.append(pid)
    return found


def _ancestors() -> set[int]:
    pids = set()
    pid = os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pids


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])
