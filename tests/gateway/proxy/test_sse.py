"""SSESplitter against a plain reference parser, over random streams cut at random."""

import random

import pytest

from gateway.proxy.sse import EventTooLarge, SSESplitter, frame


def reference(stream: bytes) -> list[bytes]:
    """Each event's data, read from the whole stream at once as the SSE spec says
    (CRLF as LF; events end at a blank line; data lines joined with LF)."""
    text = stream.replace(b"\r\n", b"\n")
    out = []
    for event in text.split(b"\n\n")[:-1]:
        data = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        if data:
            out.append(b"\n".join(data))
    return out


EVENTS = [
    b'data: {"choices":[{"delta":{"content":" tok"}}]}\n\n',
    b'data:{"a":1}\n\n',
    b"data:  [DONE]\n\n",
    b": keep-alive\n\n",
    b"event: x\ndata: one\ndata: two\n\n",
    b'data: {"b":2}\r\n\r\n',
    b"id: 3\r\ndata: crlf\r\n\r\n",
    b'data: {"c":"a\rb"}\n\n',  # a lone CR is no line break
    b"data: x\r\n\n",
]


@pytest.mark.parametrize("seed", range(200))
def test_any_cut_of_a_stream_gives_the_reference_events(seed: int) -> None:
    rng = random.Random(seed)
    stream = b"".join(rng.choice(EVENTS) for _ in range(rng.randint(1, 12)))
    cuts = sorted(rng.sample(range(1, len(stream)), min(rng.randint(0, 6), len(stream) - 1)))
    splitter = SSESplitter()
    got: list[bytes] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got += splitter.feed(stream[start:end])

    assert got == reference(stream)
    assert splitter.tail() is None


def test_an_unterminated_event_past_the_limit_is_refused_and_dropped() -> None:
    splitter = SSESplitter(max_event_bytes=16)
    assert splitter.feed(b"data: a\n\ndata: 0123456789") == [b"a"]
    with pytest.raises(EventTooLarge):
        splitter.feed(b"0123456789")
    assert not splitter.buffered


def test_a_read_is_one_event_as_frame_writes_it_only_when_its_frame_is_the_read() -> None:
    reads = {
        b'data: {"a":1}\n\n': True,
        b'data: {"c":"a\rb"}\n\n': True,
        b'data:{"a":1}\n\n': False,
        b'data:  {"a":1}\n\n': False,
        b'data: {"a":1}\r\n\n': False,
        b'data: {"a":1}\n': False,
        b'data: {"a":1}\n\ndata: {"b":2}\n\n': False,
        b"data: [DONE]\n\n": False,
    }
    got = {}
    for read, one in reads.items():
        splitter = SSESplitter()
        got[read] = splitter.is_one_event(read, b"data: {")
        if one:
            (payload,) = splitter.feed(read)
            assert frame(payload) == read
    assert got == reads
    held = SSESplitter()
    held.feed(b"data: {")
    assert not held.is_one_event(b'data: {"a":1}\n\n', b"data: {")
