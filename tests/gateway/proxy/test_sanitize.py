"""SSE framing, the OpenAI allow-list, and reading vLLM's per-request spec metrics."""

import json
from collections.abc import AsyncIterator

from gateway.proxy.relay import RelayResult, client_frame
from gateway.proxy.sanitize import sanitize, spec_stats, usage_of
from gateway.proxy.sse import sse_data

# The final usage chunk as vLLM 0.32 emits it with --per-request-spec-decode-metrics summary.
VLLM_USAGE_CHUNK = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "tiny",
    "choices": [],
    "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
    "metrics": {
        "speculative_decoding": {
            "mean_acceptance_length": 2.0,
            "draft_acceptance_rate": 0.5,
            "acceptance_histogram": [1, 2, 0, 3],
            "num_spec_steps": 6,
            "num_accepted_draft_tokens": 11,
            "num_draft_tokens": 18,
            "num_spec_tokens": 3,
        }
    },
    "kv_transfer_params": {"x": 1},
    "prompt_token_ids": [1, 2, 3],
}


def test_allow_list_drops_engine_fields_and_keeps_usage() -> None:
    doc = dict(VLLM_USAGE_CHUNK)
    doc["choices"] = [
        {"index": 0, "delta": {"content": "a"}, "stop_reason": None, "token_ids": [5]}
    ]
    out = sanitize(doc)
    assert set(out) == {"id", "object", "created", "model", "choices", "usage"}
    assert out["choices"] == [{"index": 0, "delta": {"content": "a"}}]
    assert "usage" not in sanitize(doc, keep_usage=False)


def test_spec_stats_per_position_from_the_acceptance_histogram() -> None:
    stats = spec_stats(VLLM_USAGE_CHUNK)
    assert stats is not None
    # steps accepting >=1: 2+0+3, >=2: 0+3, >=3: 3
    assert stats.accepted_per_position == (5, 3, 3)
    assert (stats.drafts, stats.drafted_tokens, stats.accepted_tokens) == (6, 18, 11)
    assert sum(stats.accepted_per_position) == stats.accepted_tokens
    assert spec_stats({"metrics": {"speculative_decoding": {"acceptance_histogram": "x"}}}) is None
    assert spec_stats({"choices": []}) is None
    usage = usage_of(VLLM_USAGE_CHUNK)
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (9, 12)


def test_spec_stats_the_telemetry_contract_would_refuse_are_no_stats() -> None:
    sd = VLLM_USAGE_CHUNK["metrics"]["speculative_decoding"]  # type: ignore[index]
    for changed in (
        {"num_accepted_draft_tokens": 19},  # of 18 drafted
        {"num_draft_tokens": -1},
        {"acceptance_histogram": [1, 2, 3, -1]},
    ):
        assert spec_stats({"metrics": {"speculative_decoding": sd | changed}}) is None, changed
    # Without num_draft_tokens, nothing counts as drafted: the histogram's acceptance
    # (accepted_tokens from it) would exceed it.
    histogram_only = {"acceptance_histogram": [0, 1]}
    assert spec_stats({"metrics": {"speculative_decoding": histogram_only}}) is None
    assert spec_stats({"metrics": {"speculative_decoding": sd | {"num_accepted_draft_tokens": 18}}})
    # Position 0 accepted in 5 proposals: with 4 proposals reported, that cannot be.
    assert spec_stats({"metrics": {"speculative_decoding": sd | {"num_spec_steps": 4}}}) is None
    assert spec_stats({"metrics": {"speculative_decoding": sd | {"num_spec_steps": 5}}})


def test_per_step_arrays_that_miss_the_totals_count_as_no_positions() -> None:
    sd = VLLM_USAGE_CHUNK["metrics"]["speculative_decoding"]  # type: ignore[index]
    # Six steps of 3 drafted (18) accepting 11: the arrays add up to the totals.
    steps = {"per_step_accepted": [1, 2, 2, 3, 3, 0], "per_step_drafted": [3] * 6}
    fitting = spec_stats({"metrics": {"speculative_decoding": sd | steps}})
    # Steps begin at 1, 3, 6, 9, 13 and 17: the last in 16-63.
    assert fitting is not None
    assert fitting.by_response_position == ((15, 11), (3, 0), (0, 0), (0, 0))
    # One step short: the totals stay, the request counts whole in `unknown`.
    short = {"per_step_accepted": [1, 2, 2, 3, 3], "per_step_drafted": [3] * 5}
    stats = spec_stats({"metrics": {"speculative_decoding": sd | short}})
    assert stats is not None and stats.by_response_position is None
    assert (stats.drafts, stats.drafted_tokens, stats.accepted_tokens) == (6, 18, 11)


def test_negative_usage_is_no_usage() -> None:
    assert usage_of({"usage": {"prompt_tokens": 9, "completion_tokens": -1}}) is None
    assert usage_of({"usage": {"prompt_tokens": -9, "completion_tokens": 1}}) is None
    usage = usage_of({"usage": {"prompt_tokens": 0, "completion_tokens": 0}})
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (0, 0)


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for p in parts:
        yield p


async def test_sse_events_split_across_and_within_chunks() -> None:
    stream = _chunks(b'data: {"a":', b' 1}\n\ndata: {"b": 2}\n\n: comment\n\ndata: [DO', b"NE]\n\n")
    assert [e async for e in sse_data(stream)] == [b'{"a": 1}', b'{"b": 2}', b"[DONE]"]
    crlf = _chunks(b"data: x\r\n\r\ndata: y")
    assert [e async for e in sse_data(crlf)] == [b"x", b"y"]


def test_client_frames_forward_token_chunks_as_sent_and_strip_the_usage_chunk() -> None:
    result = RelayResult()
    # Python engines write -Infinity for an impossible token's logprob: not JSON, still relayed.
    token = (
        b'{"id":"c","object":"chat.completion.chunk","created":1,"model":"tiny","choices":'
        b'[{"index":0,"delta":{"content":"x"},"logprobs":{"content":[{"logprob":-Infinity}]}}]}'
    )
    assert client_frame(token, keep_usage=False, result=result) == b"data: " + token + b"\n\n"
    usage_only = json.dumps(VLLM_USAGE_CHUNK).encode()
    assert client_frame(usage_only, keep_usage=False, result=result) is None
    assert result.usage is not None and result.usage.completion_tokens == 12
    assert result.spec.accepted_tokens == 11
    kept = client_frame(usage_only, keep_usage=True, result=result)
    assert kept is not None
    assert set(json.loads(kept.removeprefix(b"data: "))) == {
        "id",
        "object",
        "created",
        "model",
        "choices",
        "usage",
    }
    assert client_frame(b"[DONE]", keep_usage=True, result=result) == b"data: [DONE]\n\n"
    # An event we cannot vet is never forwarded, and never dropped silently either.
    assert result.outcome == "ok"
    invalid = client_frame(b"not json", keep_usage=True, result=result)
    assert invalid is not None and b"not json" not in invalid
    assert json.loads(invalid.removeprefix(b"data: "))["error"]["code"] == "invalid_engine_event"
    assert (result.outcome, result.http_status) == ("error", 502)


def test_a_chunk_that_needs_stripping_is_re_encoded_even_with_a_lone_surrogate() -> None:
    doc = {"id": "c", "choices": [{"index": 0, "text": "\ud800 ok"}], "prompt_token_ids": [1]}
    out = client_frame(json.dumps(doc).encode(), keep_usage=True, result=RelayResult())
    assert out is not None
    assert json.loads(out.removeprefix(b"data: ")) == {
        "id": "c",
        "choices": [{"index": 0, "text": "\ud800 ok"}],
    }
