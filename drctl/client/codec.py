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

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from drctl.client.plaintext import REASONS, marked
from drctl.config.bounded_read import FileRefused, read_regular_text
from drctl.config.schema import CodecConfig

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
BINDING = "encryption-binding"  # "namespace": the associated data names the namespace
_NONCE = 12
KEYS_FILE_MAX_BYTES = 64 * 1024  # hundreds of id=key lines; a key ring is never near it
_KEY_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class CodecKeyError(ValueError):
    """The codec is configured but its keys are missing or malformed; names where they come from."""


def parse_keys(text: str, source: str) -> list[tuple[str, bytes]]:
    """`id=base64` entries in order; the first is the current key.

    An error names the source and the entry's position, never the entry: whatever the format
    mistake (a key without its id, id and key swapped, a stray separator), the text of an entry may
    be key material, so no part of it is repeated.
    """
    keys: list[tuple[str, bytes]] = []
    position = 0
    for raw in re.split(r"[,\n]", text):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        position += 1
        where = f"{source}: entry {position}"
        key_id, sep, b64 = entry.partition("=")
        key_id = key_id.strip()
        if not sep or not _KEY_ID_RE.fullmatch(key_id):
            raise CodecKeyError(f"{where}: expected id=base64key, the id made of letters, digits, '_.-'")
        try:
            key = base64.b64decode(b64.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise CodecKeyError(f"{where}: the key is not valid base64") from None
        if len(key) != 32:
            raise CodecKeyError(f"{where}: the key is {len(key)} bytes; AES-256-GCM needs 32")
        if any(k == key_id for k, _ in keys):
            raise CodecKeyError(f"{where}: its key id appears twice")
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
        # The one bounded reader: a FIFO or /dev/zero named here is refused, not read forever.
        text = read_regular_text(path, max_bytes=KEYS_FILE_MAX_BYTES, what="temporal.codec.keys_file")
    except FileRefused as exc:  # names the setting, the path and why (missing, a FIFO, too large)
        raise CodecKeyError(str(exc)) from None
    return parse_keys(text, str(path))


class PlaintextRefused(ValueError):
    """A payload arrived unencrypted (or without its namespace binding) where the codec requires
    ciphertext; `reason` is the key of its message in drctl.client.plaintext.REASONS."""

    def __init__(self, reason: bytes) -> None:
        super().__init__(REASONS[reason])
        self.reason = reason


class AesGcmCodec(PayloadCodec):
    """Encrypts with the current key; decrypts with whichever known key the payload names.

    The associated data binds each ciphertext to its key id and its Temporal namespace, so one
    copied into another namespace's history does not decrypt there. A plaintext payload, or one
    encrypted before the namespace binding, is refused unless `allow_plaintext` (a migration
    window: turning the codec on over histories written without it).
    """

    def __init__(self, keys: list[tuple[str, bytes]], namespace: str, allow_plaintext: bool = False) -> None:
        self.current_id = keys[0][0]
        self.namespace = namespace
        self.allow_plaintext = allow_plaintext
        self._keys = {key_id: AESGCM(key) for key_id, key in keys}

    def _aad(self, key_id: str, namespace: str | None) -> bytes:
        return f"{key_id}\x00{namespace if namespace is not None else self.namespace}".encode()

    def encrypt(self, p: Payload, namespace: str | None = None) -> Payload:
        nonce = os.urandom(_NONCE)
        aad = self._aad(self.current_id, namespace)
        data = nonce + self._keys[self.current_id].encrypt(nonce, p.SerializeToString(), aad)
        metadata = {"encoding": ENCODING, KEY_ID: self.current_id.encode(), BINDING: b"namespace"}
        return Payload(metadata=metadata, data=data)

    def decrypt(self, p: Payload, namespace: str | None = None) -> Payload:
        if p.metadata.get("encoding") != ENCODING:
            if self.allow_plaintext:
                return p  # written before the codec was on: readable during the migration window
            raise PlaintextRefused(b"plaintext")
        key_id = p.metadata.get(KEY_ID, b"").decode(errors="replace")
        aes = self._keys.get(key_id)
        if aes is None:
            raise CodecKeyError(
                f"payload encrypted with key {key_id[:64]!r}, which is not among the configured keys"
            )
        bound = p.metadata.get(BINDING) == b"namespace"
        if not bound and not self.allow_plaintext:
            raise PlaintextRefused(b"unbound")
        aad = self._aad(key_id, namespace) if bound else key_id.encode()
        try:
            plain = aes.decrypt(p.data[:_NONCE], p.data[_NONCE:], aad)
        except InvalidTag:
            raise CodecKeyError(
                "payload does not decrypt: it was encrypted for another namespace, or altered"
            ) from None
        return Payload.FromString(plain)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Decrypt; a refused payload comes back marked, for the converter to fail what it reached
        (raising here would fail only the workflow task, retried forever: drctl.client.plaintext)."""
        return [self._open(p) for p in payloads]

    def _open(self, p: Payload) -> Payload:
        try:
            return self.decrypt(p)
        except PlaintextRefused as exc:
            return marked(exc.reason)


def codec_for(cfg: CodecConfig | None, namespace: str = "default") -> AesGcmCodec | None:
    if cfg is None:
        return None
    return AesGcmCodec(load_keys(cfg), namespace, allow_plaintext=cfg.allow_plaintext)
