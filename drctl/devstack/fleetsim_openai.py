"""The OpenAI completions/chat wire format as fleetsim speaks it: request validation and payloads.

Shapes follow what vLLM's OpenAI server sends, so the official `openai` client and drctl's probe
read fleetsim exactly as they would read vLLM.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

MAX_TOKENS_DEFAULT, MAX_TOKENS_CAP = 16, 512
_FILLER = ("the", "fleet", "serves", "tokens", "across", "regions", "while", "drills", "prove",
           "failover", "meets", "its", "target", "and", "traffic", "moves")  # fmt: skip


class BadRequest(Exception):
    """A request the OpenAI API would answer with 400; `param` names the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass
class Generation:
    """One validated completion or chat request."""

    chat: bool
    prompt: str
    max_tokens: int
    stream: bool
    include_usage: bool

    @property
    def prompt_tokens(self) -> int:
        return max(1, len(self.prompt.split()))

    def tokens(self) -> list[str]:
        """Deterministic filler: the same prompt always yields the same text."""
        seed = zlib.crc32(self.prompt.encode())
        return [" " + _FILLER[(seed + 7 * i) % len(_FILLER)] for i in range(self.max_tokens)]


def _chat_text(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", "messages")
    parts: list[str] = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest("each message must be an object with a string 'role'", "messages")
        content = m.get("content")
        if isinstance(content, list):  # OpenAI content parts: keep the text ones
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        if content is not None and not isinstance(content, str):
            raise BadRequest("message content must be a string or a list of parts", "messages")
        parts.append(content or "")
    return "\n".join(parts)


def parse_request(body: Any, chat: bool) -> Generation:
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    if not isinstance(body.get("model"), str):
        raise BadRequest("'model' is required and must be a string", "model")
    if chat:
        prompt = _chat_text(body.get("messages"))
    else:
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1:
            raw = raw[0]
        if isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
            raw = " ".join(map(str, raw))  # token ids: one word per id keeps prompt_tokens right
        if not isinstance(raw, str):
            raise BadRequest("'prompt' must be a string (or a single-item list)", "prompt")
        prompt = raw
    keys = ("max_completion_tokens", "max_tokens") if chat else ("max_tokens",)
    max_tokens = next((body[k] for k in keys if body.get(k) is not None), MAX_TOKENS_DEFAULT)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest("max_tokens must be a positive integer", "max_tokens")
    if body.get("n", 1) != 1:
        raise BadRequest("only n=1 is supported", "n")
    stream = body.get("stream", False)
    options = body.get("stream_options") or {}
    if not isinstance(stream, bool) or not isinstance(options, dict):
        raise BadRequest("'stream' must be a boolean and 'stream_options' an object", "stream")
    return Generation(
        chat, prompt, min(max_tokens, MAX_TOKENS_CAP), stream, bool(options.get("include_usage"))
    )


def usage(gen: Generation, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": gen.prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": gen.prompt_tokens + completion_tokens}  # fmt: skip


def _chunk_object(gen: Generation) -> str:
    return "chat.completion.chunk" if gen.chat else "text_completion"


def stream_chunk(
    gen: Generation, head: dict[str, Any], i: int, token: str, finish: str | None
) -> dict[str, Any]:
    """The SSE chunk carrying token `i`; the first chat chunk also carries the assistant role."""
    if gen.chat:
        delta = {"role": "assistant", "content": token} if i == 0 else {"content": token}
        choice: dict[str, Any] = {"index": 0, "delta": delta}
    else:
        choice = {"index": 0, "text": token}
    choice.update(logprobs=None, finish_reason=finish)
    chunk = {**head, "object": _chunk_object(gen), "choices": [choice]}
    if gen.include_usage:  # OpenAI's stream_options.include_usage: null on every chunk but the last
        chunk["usage"] = None
    return chunk


def usage_chunk(gen: Generation, head: dict[str, Any]) -> dict[str, Any]:
    """The last chunk when stream_options.include_usage is set: no choices, only usage."""
    return {**head, "object": _chunk_object(gen), "choices": [], "usage": usage(gen, gen.max_tokens)}


def full_response(gen: Generation, head: dict[str, Any], text: str) -> dict[str, Any]:
    """The non-streaming answer, with usage."""
    if gen.chat:
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text}}
        obj = "chat.completion"
    else:
        choice, obj = {"index": 0, "text": text}, "text_completion"
    choice.update(logprobs=None, finish_reason="length")
    return {**head, "object": obj, "choices": [choice], "usage": usage(gen, gen.max_tokens)}


def sse(payload: dict[str, Any] | str) -> bytes:
    """One server-sent event as OpenAI streams it: `data: <json>` and a blank line."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()
