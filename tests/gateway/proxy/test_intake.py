"""What the engine receives: the caller's own bytes, with usage asked for when streaming."""

import json

import pytest

from gateway.proxy.intake import JSONBody, engine_body

USAGE = {"include_usage": True}


def body(raw: bytes) -> JSONBody:
    return JSONBody(raw, json.loads(raw))


def test_a_non_streamed_body_is_forwarded_byte_for_byte() -> None:
    raw = b'{ "model": "m",  "prompt": "caf\\u00e9", "x": 1.50 }\n'
    assert engine_body(body(raw), stream=False) is raw


def test_a_streamed_body_keeps_its_bytes_and_gains_include_usage() -> None:
    raw = b'{"model": "m", "stream": true, "prompt": "caf\\u00e9 \\ud800", "top_p": 1.0}  \n'
    out = engine_body(body(raw), stream=True)
    assert out.startswith(raw.rstrip()[:-1])  # the caller's bytes, escapes and all
    assert json.loads(out) == json.loads(raw) | {"stream_options": USAGE}


def test_include_usage_already_asked_for_changes_nothing() -> None:
    raw = b'{"model":"m","stream":true,"stream_options":{"include_usage":true}}'
    assert engine_body(body(raw), stream=True) is raw


@pytest.mark.parametrize(
    ("options", "merged"),
    [
        ({"continuous_usage_stats": True}, {"continuous_usage_stats": True, **USAGE}),
        ({"include_usage": False}, USAGE),
        (None, USAGE),
    ],
)
def test_existing_stream_options_are_merged(options: object, merged: dict[str, bool]) -> None:
    doc = {"model": "m", "stream": True, "stream_options": options, "prompt": "\ud800"}
    out = engine_body(body(json.dumps(doc).encode()), stream=True)
    assert json.loads(out) == doc | {"stream_options": merged}


def test_a_body_in_utf16_is_re_encoded_not_spliced() -> None:
    doc = {"model": "m", "stream": True, "prompt": "ü"}
    out = engine_body(body(json.dumps(doc).encode("utf-16")), stream=True)
    assert json.loads(out.decode("utf-8")) == doc | {"stream_options": USAGE}
