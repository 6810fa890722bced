"""Server-sent events framing: split an engine byte stream into `data:` payloads."""

from collections.abc import AsyncIterable, AsyncIterator

DONE = b"[DONE]"


class EventTooLarge(Exception):
    """One event of the engine's stream is larger than the gateway buffers."""


class SSESplitter:
    """Incremental SSE parser: feed it raw chunks, get back each complete event's data.

    Multi-line data fields are joined with "\\n" as the SSE spec says; comment
    and other field lines are ignored. With `max_event_bytes`, an event still
    unterminated past that size raises EventTooLarge instead of growing the buffer.
    """

    __slots__ = ("_buffer", "max_event_bytes")

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._buffer = b""
        self.max_event_bytes = max_event_bytes

    def is_one_event(self, chunk: bytes, start: bytes = b"data:") -> bool:
        """`chunk` is exactly one one-line event beginning with `start` and nothing is
        buffered before it: `feed` would return `[chunk[5:-2].lstrip(b" ")]`.

        A `start` of `b"data: {"` (the form `frame` writes) also makes `frame` of
        that payload `chunk` itself."""
        # NOTE: "\n\n" and no other line break, no CR before it (that would be a CRLF;
        # a lone CR elsewhere is no line break to the loop in `feed` either).
        return (
            not self._buffer
            and chunk.startswith(start)
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk[-1] == 10  # "\n"
            and chunk[-3] != 13  # "\r"
        )

    def feed(self, chunk: bytes) -> list[bytes]:
        if self.is_one_event(chunk):
            # NOTE: the common case, a read holding exactly one one-line event (an
            # engine writes each token as one); the general loop below costs ~3x more.
            return [chunk[5:-2].lstrip(b" ")]
        buffer = self._buffer + chunk
        if b"\r" in buffer:
            # NOTE: the whole buffer, not the chunk: a "\r\n" may straddle two chunks.
            buffer = buffer.replace(b"\r\n", b"\n")
        # NOTE: split, not a find loop: the same events (both cut at each "\n\n" from
        # the left), a third less CPU for a read holding several.
        *events, rest = buffer.split(b"\n\n")
        out: list[bytes] = []
        for event in events:
            if event.startswith(b"data:") and b"\n" not in event:
                out.append(event[5:].lstrip(b" "))  # the one-line event every OpenAI server sends
                continue
            data = [
                line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")
            ]
            if data:
                out.append(b"\n".join(data))
        self._buffer = rest
        if self.max_event_bytes is not None and len(self._buffer) > self.max_event_bytes:
            self._buffer = b""
            raise EventTooLarge(f"an engine event is larger than {self.max_event_bytes} bytes")
        return out

    @property
    def buffered(self) -> bool:
        """Bytes of an unterminated event are held (what `tail` would look at)."""
        return bool(self._buffer)

    def tail(self) -> bytes | None:
        """The data of an unterminated last event once the stream ended, if any."""
        tail, self._buffer = self._buffer.strip(), b""
        if tail.startswith(b"data:"):
            return tail[5:].lstrip(b" ")
        return None


async def sse_data(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """Yield each event's data payload as soon as its terminating blank line arrives."""
    splitter = SSESplitter()
    async for chunk in chunks:
        for event in splitter.feed(chunk):
            yield event
    tail = splitter.tail()
    if tail is not None:
        yield tail


def frame(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"
