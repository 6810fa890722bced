"""Server-sent events framing: split an engine byte stream into `data:` payloads."""

from collections.abc import AsyncIterable, AsyncIterator

DONE = b"[DONE]"


async def sse_data(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """Yield each event's data payload as soon as its terminating blank line arrives.

    Multi-line data fields are joined with "\\n" as the SSE spec says; comment
    and other field lines are ignored.
    """
    buffer = b""
    async for chunk in chunks:
        buffer += chunk.replace(b"\r\n", b"\n")
        while True:
            end = buffer.find(b"\n\n")
            if end < 0:
                break
            event, buffer = buffer[:end], buffer[end + 2 :]
            data = [
                line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")
            ]
            if data:
                yield b"\n".join(data)
    tail = buffer.strip()
    if tail.startswith(b"data:"):
        yield tail[5:].lstrip(b" ")


def frame(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"
