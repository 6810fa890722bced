"""The offline evaluation's arithmetic and prompt store, against references."""

import json
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

from control.stats import expected_speedup
from engine.evaluation.measure import (
    DecodeTiming,
    Tally,
    expected_speedups,
    timed_cost_ratio,
    tokens_per_pass,
)
from engine.evaluation.run import CaseRun, baseline_timing, spec_timing
from specwire.prompts import (
    TOKEN_ENV,
    PromptStoreError,
    load_store,
    prompt_digest,
    resolve_cases,
)
from tests.gateway.server import dead_url, serve_app


def test_tally_from_histograms_matches_hand_counts_and_the_control_reference() -> None:
    tally = Tally()
    # k = 3; steps accepting exactly 0, 1, 2, 3 drafts.
    tally.add([2, 1, 1, 4])
    tally.add([0, 1, 0, 1])
    assert (tally.cases, tally.steps, tally.k) == (2, 10, 3)
    assert tally.accepted == 0 * 2 + 1 * 2 + 2 * 1 + 3 * 5
    assert tally.mean_acceptance_length() == pytest.approx(1 + 19 / 10)
    assert tally.acceptance_rate() == pytest.approx(19 / 30)
    # Reached position 1 in all 10 steps, accepted it in 8; position 2: 6 of 8; 3: 5 of 6.
    assert tally.conditional_rates() == pytest.approx([8 / 10, 6 / 8, 5 / 6])
    # tau(3) = mean acceptance length when every step drafted k = 3.
    assert tokens_per_pass(tally.conditional_rates(), 3, 0.0) == pytest.approx(2.9)
    speedups = expected_speedups(tally, [1, 3, 5], 0.1)
    rates = tally.conditional_rates()
    for depth in (1, 3):
        assert speedups[str(depth)] == pytest.approx(expected_speedup(rates, depth, 0.1))
    # Deeper than measured: the missing positions at the pooled rate.
    assert speedups["5"] == pytest.approx(
        expected_speedup(rates, 5, 0.1, fill_rate=tally.acceptance_rate())
    )


def test_prompt_store_digests_are_checked(tmp_path: Path) -> None:
    chat = [{"role": "user", "content": "def fib(n):"}]
    store = tmp_path / "prompts.jsonl"
    store.write_text(
        json.dumps({"ref": "a", "messages": chat}) + "\n" + json.dumps({"ref": "b", "prompt": "x"})
    )
    prompts = load_store(f"file://{store}")
    assert prompts == {"a": chat, "b": "x"}
    case = {"case_key": "c1", "prompt_ref": "a", "prompt_sha256": prompt_digest(chat)}
    assert resolve_cases([case], prompts) == [(case, chat)]
    with pytest.raises(PromptStoreError, match="sha256 mismatch"):
        resolve_cases([{**case, "prompt_sha256": prompt_digest("other")}], prompts)
    with pytest.raises(PromptStoreError, match="not in the store"):
        resolve_cases([{**case, "prompt_ref": "zzz"}], prompts)
    with pytest.raises(PromptStoreError, match=r"local files \(file://\) and http"):
        load_store("s3://bucket/prompts.jsonl")


def test_prompt_store_over_http_with_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store served over HTTP (a real server on loopback), read with the store's token."""
    chat = [{"role": "user", "content": "def fib(n):"}]
    lines = (
        json.dumps({"ref": "a", "messages": chat}) + "\n" + json.dumps({"ref": "b", "prompt": "x"})
    )
    seen: list[str | None] = []
    app = FastAPI()

    @app.get("/evals/code.jsonl")
    def store(request: Request) -> PlainTextResponse:
        seen.append(request.headers.get("authorization"))
        if request.headers.get("authorization") != "Bearer store-secret":
            return PlainTextResponse("no", status_code=403)
        return PlainTextResponse(lines)

    with serve_app(app) as url:
        with pytest.raises(PromptStoreError, match="HTTP 403"):
            load_store(f"{url}/evals/code.jsonl")
        monkeypatch.setenv(TOKEN_ENV, "store-secret")
        assert load_store(f"{url}/evals/code.jsonl") == {"a": chat, "b": "x"}
        with pytest.raises(PromptStoreError, match="HTTP 404"):
            load_store(f"{url}/evals/missing.jsonl")
    assert seen == [None, "Bearer store-secret"]
    with pytest.raises(PromptStoreError, match=r"prompt store http://127\.0\.0\.1:"):
        load_store(f"{dead_url()}/evals/code.jsonl")


def test_the_cost_ratio_timed_on_both_engines_inverts_the_closed_form() -> None:
    # Target decode step 20 ms; k = 3 draft passes of 2 ms each: a verification step
    # costs 20 * (1 + 3 * 0.1) = 26 ms.
    step = DecodeTiming(seconds=2.6, passes=100)
    token = DecodeTiming(seconds=1.0, passes=50)
    assert timed_cost_ratio(step, token, 3) == pytest.approx(0.1)
    # A verify step faster than a baseline token (noise at tiny sizes) is no negative cost.
    assert timed_cost_ratio(DecodeTiming(0.9, 50), token, 3) == 0.0
    assert timed_cost_ratio(DecodeTiming(0.0, 0), token, 3) is None


def _run(histogram: list[int], tokens: int, chunks: int, seconds: float) -> CaseRun:
    return CaseRun(
        histogram=histogram,
        output_chunks=chunks,
        completion_tokens=tokens,
        decode_seconds=seconds,
        prompt_text="p",
        completion="c",
    )


def test_decode_timings_count_the_passes_after_the_first_output() -> None:
    # Spec: 4 + 6 verification steps after the prefill's token; a one-chunk case has no
    # decode interval and is left out of both the time and the passes.
    spec = [_run([1, 1, 1, 1], 11, 5, 0.1), _run([0, 2, 2, 2], 19, 7, 0.2), _run([1], 2, 1, 0.0)]
    spec_decode = spec_timing(spec)
    assert spec_decode.seconds == pytest.approx(0.3)
    assert spec_decode.passes == 10
    baseline = [_run([], 11, 11, 0.2), _run([], 19, 19, 0.36), _run([], 1, 1, 0.0)]
    baseline_decode = baseline_timing(baseline)
    assert baseline_decode.seconds == pytest.approx(0.56)
    assert baseline_decode.passes == 28
