"""`engine evaluate`'s client side against engines that stream at a known pace (the
benchmark's fake upstream, real HTTP on loopback): per-case histograms from the final
usage chunk, cases in flight together, and the cost ratio timed on both engines.
The same path on the real vLLM pools: tests/engine/test_evaluate_vllm.py."""

import threading
from typing import Any

import pytest

from engine.evaluation.results import case_results, measured, tally
from engine.evaluation.run import (
    CaseRun,
    baseline_timing,
    choose_cost_ratio,
    run_all,
    spec_timing,
)
from engine.fake import FakeUpstream
from tests.engine.failing_engine import FailingEngine, FailMode
from tests.gateway.server import serve_app

TOKENS = 16


def _cases(n: int) -> list[tuple[dict[str, Any], Any]]:
    chat = [{"role": "user", "content": "def f():"}]
    return [
        ({"case_key": f"c{i}", "labels": {"task": "code" if i % 2 else "chat"}}, chat)
        if i % 3
        else ({"case_key": f"c{i}", "labels": {"temperature": "0.5"}}, "import os\n")
        for i in range(n)
    ]


def test_cases_stream_concurrently_and_the_cost_ratio_is_timed_on_both_engines() -> None:
    # Spec: a chunk every 20 ms and 8 verification steps per case (the fake's metrics);
    # baseline: a token every 5 ms.
    spec_engine, base_engine = FakeUpstream(TOKENS, 0.02, "tiny"), FakeUpstream(TOKENS, 0.005)
    cases = _cases(6)
    done: list[int] = []
    lock = threading.Lock()

    def progress(n: int) -> None:
        with lock:
            done.append(n)

    with (
        serve_app(spec_engine) as spec_url,
        serve_app(base_engine) as base_url,
    ):
        spec = run_all(
            spec_url,
            cases,
            k=3,
            max_tokens=TOKENS,
            temperature=0.0,
            concurrency=3,
            progress=progress,
        )
        base = run_all(base_url, cases, k=None, max_tokens=TOKENS, temperature=0.0, concurrency=3)
    assert sum(done) == len(cases)
    assert [r.histogram for r in spec] == [[4, 4, 0, 0]] * len(cases)
    assert all(r.histogram == [] for r in base)
    assert all(r.output_chunks == TOKENS and r.completion_tokens == TOKENS for r in spec + base)
    assert spec[0].completion == " tok" * TOKENS
    overall, slices = tally(cases, spec)
    assert (overall.cases, overall.steps, overall.accepted) == (6, 48, 24)
    assert set(slices) == {"task=code", "task=chat", "temperature=0.5"}
    assert slices["temperature=0.5"].cases == 2

    # Nominally 15 gaps of 20 ms over 8 steps per spec case and 15 gaps of 5 ms over 15
    # tokens per baseline case. The fake keeps absolute deadlines, so a first chunk that
    # arrives late (a loaded machine) shortens the window the client sees: half the
    # nominal time is the bound. The ratio itself is timing and is checked on fixed
    # numbers below; here only that both engines were timed, each at its own pace.
    step, token = spec_timing(spec), baseline_timing(base)
    assert (step.passes, token.passes) == (6 * 8, 6 * 15)
    assert step.seconds >= 6 * 15 * 0.02 * 0.5 and token.seconds >= 6 * 15 * 0.005 * 0.5
    assert step.seconds > 2 * token.seconds
    ratio, source = choose_cost_ratio({}, 3, spec, base, given=None)
    assert ratio >= 0.0
    assert source.startswith("measured: ") and "per verification step over 48 steps" in source
    assert choose_cost_ratio({}, 3, spec, base, given=0.2) == (0.2, "given with --cost-ratio")


def test_the_cost_ratio_is_the_verification_step_over_the_baseline_token() -> None:
    # Two spec cases of 8 steps in 0.3 s each; two baseline cases of 16 tokens in
    # 0.075 s each: a step costs 0.0375 s, a token 0.005 s, so c = (7.5 - 1) / 3.
    spec = [CaseRun([4, 4, 0, 0], 16, 16, 0.3, "p", "x") for _ in range(2)]
    base = [CaseRun([], 16, 16, 0.075, "p", "x") for _ in range(2)]
    ratio, source = choose_cost_ratio({}, 3, spec, base, given=None)
    assert ratio == pytest.approx((7.5 - 1) / 3)
    assert source == (
        "measured: 37.50 ms per verification step over 16 steps "
        "vs 5.00 ms per baseline token over 30 tokens"
    )
    # A step cheaper than a baseline token is a ratio of 0, never negative.
    fast = [CaseRun([4, 4, 0, 0], 16, 16, 0.01, "p", "x")]
    assert choose_cost_ratio({}, 3, fast, base, given=None)[0] == 0.0


def _run(histogram: list[int], completion: str) -> CaseRun:
    return CaseRun(histogram, 4, 9, 0.1, "prompt", completion)


def test_case_results_carry_numbers_and_a_greedy_divergence_outcome_never_text() -> None:
    cases = [
        ({"case_key": "same", "labels": {}}, "p"),
        ({"case_key": "differs", "labels": {}}, "p"),
        ({"case_key": "sampled", "labels": {"temperature": "0.7"}}, "p"),
    ]
    # k = 3: 2 steps accepting 0, 3 accepting 2, 1 accepting all 3.
    spec = [_run([2, 0, 3, 1], "abc"), _run([1, 1, 0, 0], "abd"), _run([0, 0, 0, 5], "xyz")]
    base = [_run([], "abc"), _run([], "abc"), _run([], "different")]
    rows = case_results(cases, spec, base, k=3, temperature=0.0)
    assert rows[0] == {
        "case_key": "same",
        "outcome": "ok",
        "completion_tokens": 9,
        "drafts": 6,
        "accepted_per_position": [4, 4, 1],
    }
    # Greedy output that differs from the target alone diverged; sampled output may differ.
    assert [r["outcome"] for r in rows] == ["ok", "diverged", "ok"]
    assert rows[2]["accepted_per_position"] == [5, 5, 5]
    # Without a baseline engine nothing is compared.
    assert {r["outcome"] for r in case_results(cases, spec, None, k=3, temperature=0.0)} == {"ok"}
    assert "abc" not in repr(rows) and "prompt" not in repr(rows)


@pytest.mark.parametrize("mode", ["status", "event"])
def test_a_case_the_engine_fails_is_an_error_outcome_outside_every_aggregate(
    mode: FailMode,
) -> None:
    # Case c4's prompt is the only one holding the marker; the engine fails it alone.
    cases = _cases(6)
    cases[4] = (cases[4][0], [{"role": "user", "content": "FAIL-ME"}])
    engine = FailingEngine(FakeUpstream(TOKENS, 0.001, "tiny"), "FAIL-ME", mode)
    with serve_app(engine) as url:
        spec = run_all(url, cases, k=3, max_tokens=TOKENS, temperature=0.0, concurrency=3)
    assert engine.failed == 1
    assert [r.error is None for r in spec] == [True, True, True, True, False, True]
    failure = spec[4].error
    assert failure is not None and "illegal memory access" in failure
    assert failure.startswith("engine answered 500" if mode == "status" else "engine error")

    good = measured(cases, spec, None)
    assert good.failed == {"c4": failure}
    assert [c["case_key"] for c, _ in good.cases] == ["c0", "c1", "c2", "c3", "c5"]
    overall, slices = tally(good.cases, good.spec)
    # Five cases of 8 steps, half accepting one draft: the failed case adds nothing.
    assert (overall.cases, overall.steps, overall.accepted) == (5, 40, 20)
    assert slices["task=chat"].cases == 1  # c2 (c4 was the other chat case)
    rows = case_results(cases, spec, None, k=3, temperature=0.0)
    assert rows[4] == {
        "case_key": "c4",
        "outcome": "error",
        "completion_tokens": 0,
        "drafts": 0,
        "accepted_per_position": [0, 0, 0],
    }
    assert [r["outcome"] for r in rows] == ["ok"] * 4 + ["error", "ok"]
    assert rows[0]["drafts"] == 8 and rows[0]["accepted_per_position"] == [4, 0, 0]


def test_a_case_the_baseline_engine_fails_is_neither_timed_nor_compared() -> None:
    cases = _cases(3)
    spec = [_run([2, 0, 3, 1], "abc")] * 3
    base = [_run([], "abc"), CaseRun.failed("engine answered 503: busy"), _run([], "abc")]
    good = measured(cases, spec, base)
    assert good.failed == {"c1": "baseline: engine answered 503: busy"}
    assert good.baseline is not None and len(good.baseline) == len(good.spec) == 2
    rows = case_results(cases, spec, base, k=3, temperature=0.0)
    assert [r["outcome"] for r in rows] == ["ok", "error", "ok"]
    assert rows[1]["drafts"] == 0
