"""One reader for every file a user names: configs, experiments, plan texts, tokens, keys, TLS files.

`read_regular_file` refuses, with a message naming what the file is for, its path and the limit:
- anything that is not a regular file, before opening it (a FIFO would block the reader for good,
  `/dev/zero` or `/dev/urandom` would never end, a directory or socket cannot be read as text);
- a file swapped for something else between the check and the open: the open does not follow a
  final symlink and does not block (O_NONBLOCK, so even a FIFO put in its place returns at once),
  and the opened file must be the regular file that was checked (same device and inode);
- a file larger than `max_bytes` (at most `max_bytes + 1` bytes are read);
- a read that takes longer than `timeout_s` (a hung network mount), checked between chunks.

Symlinks are followed to their target (a config or a mounted Kubernetes Secret is often reached
through one, and must work as it does at its real path); the target itself must be a regular file.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

_CHUNK_BYTES = 1 << 16
DEFAULT_TIMEOUT_S = 10.0
# O_NOFOLLOW and O_CLOEXEC are POSIX; O_NONBLOCK too. getattr keeps the module importable elsewhere.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
)


class FileRefused(OSError):
    """A file that was not read: missing, not a regular file, too large or too slow.

    An OSError, so callers that already report unreadable files report these the same way:
    `strerror` is the reason alone (for a caller that names the file itself), and the message
    names what the file is for, its path and the reason or limit that refused it.
    """

    def __init__(self, what: str, path: str, reason: str, code: int = errno.EINVAL) -> None:
        super().__init__(code, reason)
        self.message = f"{what} {path}: {reason}"

    def __str__(self) -> str:
        return self.message


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def _refuse_os(what: str, path: str, exc: OSError) -> FileRefused:
    reason = exc.strerror or type(exc).__name__
    return FileRefused(what, path, reason, exc.errno or errno.EIO)


def read_regular_file(
    path: Path | str, *, max_bytes: int, what: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes` of them.

    Args:
        path: the file, as the user gave it (symlinks are followed to a regular file).
        max_bytes: the largest file accepted; a larger one is refused after reading `max_bytes + 1`.
        what: what the file is for, e.g. "fleet config" or "workload.auth.token_file".
        timeout_s: the longest the read may take.

    Raises:
        FileRefused: naming `what`, the path and the reason.
    """
    shown = str(path)
    real = os.path.realpath(path)
    try:
        before = os.lstat(real)
    except OSError as exc:
        raise _refuse_os(what, shown, exc) from None
    if not stat.S_ISREG(before.st_mode):
        raise FileRefused(what, shown, f"{_kind(before.st_mode)}, not a regular file")
    deadline = time.monotonic() + timeout_s
    try:
        fd = os.open(real, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink put in place after realpath
            raise FileRefused(what, shown, "changed while being opened") from None
        raise _refuse_os(what, shown, exc) from None
    try:
        after = os.fstat(fd)
        if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise FileRefused(what, shown, f"changed while being opened ({_kind(after.st_mode)})")
        chunks: list[bytes] = []
        got = 0
        while got <= max_bytes:
            if time.monotonic() > deadline:
                raise FileRefused(what, shown, f"not read within {timeout_s:g} s", errno.ETIMEDOUT)
            chunk = os.read(fd, min(_CHUNK_BYTES, max_bytes + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except FileRefused:
        raise
    except OSError as exc:
        raise _refuse_os(what, shown, exc) from None
    finally:
        os.close(fd)
    if got > max_bytes:
        raise FileRefused(what, shown, f"larger than the {max_bytes:,}-byte limit", errno.EFBIG)
    return b"".join(chunks)


def read_regular_text(
    path: Path | str, *, max_bytes: int, what: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> str:
    """`read_regular_file`, decoded as UTF-8; bytes that are not UTF-8 are refused the same way."""
    data = read_regular_file(path, max_bytes=max_bytes, what=what, timeout_s=timeout_s)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(what, str(path), f"not UTF-8 text (byte {exc.start})") from None
