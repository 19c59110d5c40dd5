"""A unix-socket server standing in for an HAProxy runtime socket: broken ones, and recorded ones.

It accepts, reads the command line and answers with what the test gives it: fixed bytes, nothing
(None: hold the connection and never answer), or a function of the line (a transcript replay).
Then it closes the connection, as HAProxy does in non-interactive mode.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "providers" / "transcripts"
Reply = bytes | None | Callable[[str], bytes]


class FakeSocket:
    """A unix-socket server answering every connection with `reply`."""

    def __init__(self, path: Path, reply: Reply) -> None:
        self.path = str(path)
        self.reply = reply
        self.received: list[bytes] = []
        self._srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._srv.bind(self.path)
        self._srv.listen(8)
        self._srv.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    line = conn.recv(65536)
                    self.received.append(line)
                    if self.reply is None:
                        self._stop.wait(5)  # silent: hold the connection open, answer nothing
                    elif callable(self.reply):
                        conn.sendall(self.reply(line.decode().rstrip("\n")))
                    else:
                        conn.sendall(self.reply)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._srv.close()


class Transcript:
    """The recorded replies of one HAProxy release, replayed in order per command line.

    A command sent more often than it was recorded gets its last recorded reply again; a command
    never recorded fails the test loudly (the client sent something the transcript cannot vouch for).
    """

    def __init__(self, version: str) -> None:
        self.doc = json.loads((TRANSCRIPTS / f"haproxy-{version}" / "runtime.json").read_text())
        self._replies: dict[str, list[str]] = {}
        for ex in self.doc["exchanges"]:
            self._replies.setdefault(ex["send"], []).append(ex["reply"])
        self.unknown: list[str] = []

    def __call__(self, line: str) -> bytes:
        queue = self._replies.get(line)
        if not queue:
            self.unknown.append(line)
            return b"Unknown command (not in the transcript).\n\n"
        return (queue.pop(0) if len(queue) > 1 else queue[0]).encode()
