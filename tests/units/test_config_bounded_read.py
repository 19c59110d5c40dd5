"""The one reader of user-named files refuses what is not a small regular file, before blocking."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from drctl.config.bounded_read import FileRefused, read_regular_file, read_regular_text


def _refusal(path: Path | str, max_bytes: int = 100) -> str:
    with pytest.raises(FileRefused) as info:
        read_regular_file(path, max_bytes=max_bytes, what="fleet config")
    message = str(info.value)
    assert message.startswith(f"fleet config {path}: ")
    assert message.endswith(str(info.value.strerror))  # the reason alone, for callers naming the file
    return message


def test_fifo_is_refused_without_opening(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert "a FIFO" in _refusal(fifo)


def test_devices_directories_and_sockets_are_refused(tmp_path: Path) -> None:
    assert "a character device" in _refusal("/dev/zero")
    assert "a directory" in _refusal(tmp_path)
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert "a socket" in _refusal(sock_path)


def test_missing_file_names_the_reason(tmp_path: Path) -> None:
    assert "No such file" in _refusal(tmp_path / "absent.yaml")


def test_size_limit_reads_at_most_one_byte_more(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_bytes(b"x" * 10)
    assert read_regular_file(f, max_bytes=10, what="fleet config") == b"x" * 10
    assert "larger than the 9-byte limit" in _refusal(f, max_bytes=9)


def test_symlink_to_a_regular_file_is_read_and_to_a_fifo_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    real.write_text("a: 1\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    assert read_regular_text(link, max_bytes=100, what="fleet config") == "a: 1\n"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    to_fifo = tmp_path / "to-fifo.yaml"
    to_fifo.symlink_to(fifo)
    assert "a FIFO" in _refusal(to_fifo)


def test_text_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "t"
    f.write_bytes(b"ok\xff")
    with pytest.raises(FileRefused, match=r"token file .*: not UTF-8 text \(byte 2\)"):
        read_regular_text(f, max_bytes=100, what="token file")
