"""The one reader of server-sent events in drctl: the prober's streamed completions (aiohttp) and the
inference client's time to first token (httpx) both read their streams through `data_events`.

vLLM, like OpenAI, streams a completion as events of one `data:` line each, `data: {json}` then a
blank line, and ends the stream with `data: [DONE]`. The reader follows the event-stream format
(WHATWG HTML, "server-sent events") as far as a completion needs it:
- a line `data:VALUE` or `data: VALUE` adds VALUE to the event (one leading space dropped); several
  data lines of one event are joined with "\\n";
- a blank line ends the event, which is yielded if it had data;
- comments (a line starting with ":") and other fields (`event:`, `id:`, `retry:`) are skipped;
- CR, LF and CRLF line ends are all accepted; an event the stream cuts before its blank line is
  dropped, as a browser drops it (the answer was cut, and the caller counts that as a failure).

httpx-sse would serve the httpx side only; the prober's aiohttp stream needs the same reading, so
one small reader serves both, with `aiohttp_lines` adapting aiohttp's byte lines.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

DONE = "[DONE]"  # the data of the event that ends an OpenAI-style stream


def is_done(data: str) -> bool:
    return data.strip() == DONE


async def data_events(lines: AsyncIterable[str]) -> AsyncIterator[str]:
    """The data of each complete event in `lines` (text lines, with or without their line end)."""
    data: list[str] = []
    async for raw in lines:
        # aiohttp yields lines with their "\n" (and a "\r" before it); httpx yields them without.
        line = raw.rstrip("\n").rstrip("\r")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)


async def aiohttp_lines(content: AsyncIterable[bytes]) -> AsyncIterator[str]:
    """aiohttp's response body (`resp.content`) as text lines; undecodable bytes replaced."""
    async for raw in content:
        yield raw.decode("utf-8", "replace")
