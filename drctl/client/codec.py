"""Payload encryption: AES-256-GCM over every Temporal payload, so no secret sits in plain history.

Workflow inputs carry `--env HF_TOKEN=...`, experiment configuration values and notification
tokens. With `temporal.codec` configured, the worker and the CLI encrypt every payload before it
leaves the process; the Temporal server, its database and `temporal workflow show` see only
ciphertext. The UI decrypts through `drctl codec-server` for those allowed.

Keys: `id=base64key` entries (32-byte keys), comma- or newline-separated, from an env var or a file.
The first entry is the current key and encrypts; any listed key decrypts. Each encrypted payload
names its key id in its metadata, so keys rotate by putting the new key first and keeping the old
ones until no open history needs them.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from drctl.config.schema import CodecConfig

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
_NONCE = 12
_KEY_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class CodecKeyError(ValueError):
    """The codec is configured but its keys are missing or malformed; names where they come from."""


def parse_keys(text: str, source: str) -> list[tuple[str, bytes]]:
    """`id=base64` entries in order; the first is the current key."""
    keys: list[tuple[str, bytes]] = []
    for raw in re.split(r"[,\n]", text):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        key_id, sep, b64 = entry.partition("=")
        key_id = key_id.strip()
        if not sep or not _KEY_ID_RE.match(key_id):
            raise CodecKeyError(f"{source}: expected id=base64key entries, got {entry[:12]!r}...")
        try:
            key = base64.b64decode(b64.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise CodecKeyError(f"{source}: key {key_id!r} is not valid base64") from None
        if len(key) != 32:
            raise CodecKeyError(f"{source}: key {key_id!r} is {len(key)} bytes; AES-256-GCM needs 32")
        if any(k == key_id for k, _ in keys):
            raise CodecKeyError(f"{source}: key id {key_id!r} appears twice")
        keys.append((key_id, key))
    if not keys:
        raise CodecKeyError(f"{source}: no keys")
    return keys


def load_keys(cfg: CodecConfig) -> list[tuple[str, bytes]]:
    if cfg.keys_env:
        text = os.environ.get(cfg.keys_env, "")
        if not text.strip():
            raise CodecKeyError(
                f"temporal.codec.keys_env: environment variable {cfg.keys_env} is unset or empty"
            )
        return parse_keys(text, f"environment variable {cfg.keys_env}")
    path = Path(cfg.keys_file or "")
    try:
        text = path.read_text()
    except OSError as exc:
        raise CodecKeyError(f"temporal.codec.keys_file: cannot read {path}: {exc.strerror}") from None
    return parse_keys(text, str(path))


class AesGcmCodec(PayloadCodec):
    """Encrypts with the current key; decrypts with whichever known key the payload names."""

    def __init__(self, keys: list[tuple[str, bytes]]) -> None:
        self.current_id = keys[0][0]
        self._keys = {key_id: AESGCM(key) for key_id, key in keys}

    def encrypt(self, p: Payload) -> Payload:
        nonce = os.urandom(_NONCE)
        # The key id is authenticated data: moving a ciphertext under another id fails to decrypt.
        data = nonce + self._keys[self.current_id].encrypt(
            nonce, p.SerializeToString(), self.current_id.encode()
        )
        return Payload(metadata={"encoding": ENCODING, KEY_ID: self.current_id.encode()}, data=data)

    def decrypt(self, p: Payload) -> Payload:
        if p.metadata.get("encoding") != ENCODING:
            return p  # written before the codec was on: readable as it is
        key_id = p.metadata.get(KEY_ID, b"").decode()
        aes = self._keys.get(key_id)
        if aes is None:
            raise CodecKeyError(
                f"payload encrypted with key {key_id!r}, which is not among the configured keys"
            )
        return Payload.FromString(aes.decrypt(p.data[:_NONCE], p.data[_NONCE:], key_id.encode()))

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]


def codec_for(cfg: CodecConfig | None) -> AesGcmCodec | None:
    return AesGcmCodec(load_keys(cfg)) if cfg is not None else None
