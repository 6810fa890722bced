"""Where `engine evaluate` reads acceptance from (engine.evaluation.acceptance): the
run's histogram from the engine's counters, the source decided on the first case
that completes, and a per-request engine that stops sending metrics part way."""

from typing import Any

import pytest

from engine.evaluation.acceptance import (
    ENGINE_COUNTERS,
    PER_REQUEST,
    NoAcceptanceSource,
    SourceProbe,
    counter_tally,
    settle,
)
from engine.evaluation.measure import expected_speedups
from engine.evaluation.results import case_results
from engine.evaluation.run import CaseRun, EvaluationError, choose_cost_ratio, run_all
from engine.fake import FakeUpstream
from specwire import SpecCounters
from tests.engine.failing_engine import FailingEngine
from tests.gateway.server import serve_app

TOKENS = 16


def _counters(drafts: int, per_position: list[int]) -> SpecCounters:
    return SpecCounters(
        num_drafts=drafts,
        num_draft_tokens=3 * drafts,
        num_accepted_tokens=sum(per_position),
        accepted_per_position=per_position,
    )


def test_the_counters_difference_is_the_runs_histogram() -> None:
    before, after = _counters(100, [70, 40, 10]), _counters(200, [150, 90, 30])
    tally = counter_tally(before, after, 3, cases=7)
    # 100 steps; 80 accepted position 1, 50 position 2, 20 position 3.
    assert tally.histogram == [20, 30, 30, 20]
    assert (tally.cases, tally.steps, tally.accepted) == (7, 100, 150)
    assert tally.conditional_rates() == pytest.approx([0.8, 50 / 80, 20 / 50])
    assert tally.mean_acceptance_length() == pytest.approx(2.5)
    assert tally.acceptance_rate() == pytest.approx(0.5)
    assert expected_speedups(tally, [3], 0.0) == {"3": pytest.approx(2.5)}


def test_counters_that_went_backwards_or_are_no_prefix_are_refused() -> None:
    with pytest.raises(EvaluationError, match="went backwards"):
        counter_tally(_counters(100, [70, 40, 10]), _counters(50, [80, 40, 10]), 3, cases=1)
    with pytest.raises(EvaluationError, match="not a prefix acceptance"):
        counter_tally(_counters(0, [0, 0, 0]), _counters(10, [5, 8, 0]), 3, cases=1)


def _cases(n: int) -> list[tuple[dict[str, Any], Any]]:
    return [({"case_key": f"c{i}"}, [{"role": "user", "content": f"q{i}"}]) for i in range(n)]


def test_the_probe_waits_for_a_completed_case_and_refuses_an_engine_with_no_source() -> None:
    # c0 fails on the engine: the probe sees c1, the first case that completed.
    cases = _cases(4)
    cases[0] = (cases[0][0], [{"role": "user", "content": "FAIL-ME"}])
    seen: list[CaseRun] = []
    fake = FakeUpstream(TOKENS, 0.001, "tiny", per_request_metrics=False)
    engine = FailingEngine(fake, "FAIL-ME", "status")
    probe = SourceProbe("http://engine", 3, _counters(0, [0, 0, 0]))

    def watching(run: CaseRun) -> None:
        seen.append(run)
        probe(run)

    with serve_app(engine) as url:
        runs = run_all(url, cases, k=3, max_tokens=TOKENS, temperature=0.0, probe=watching)
        assert probe.source == ENGINE_COUNTERS
        assert len(seen) == 1 and seen[0].error is None and seen[0].histogram is None
        assert [r.error is None for r in runs] == [False, True, True, True]
        # No counters either: refused on c1, before c2 and c3 run.
        with pytest.raises(NoAcceptanceSource, match="--per-request-spec-decode-metrics"):
            run_all(
                url,
                cases,
                k=3,
                max_tokens=TOKENS,
                temperature=0.0,
                probe=SourceProbe(url, 3, None),
            )
    assert fake.drafts == 8 * (3 + 1)


def test_a_case_without_per_request_metrics_on_a_per_request_run_fails_alone() -> None:
    ok = CaseRun([4, 4, 0, 0], 4, 16, 0.1, "p", "c")
    bare = CaseRun(None, 4, 16, 0.1, "p", "c")
    settled = settle([ok, bare], PER_REQUEST)
    assert settled[0] == ok
    assert settled[1].error == "the engine sent no per-request speculative metrics for this case"
    # From counters no case keeps a histogram, and no row carries numbers.
    counted = settle([ok, bare], ENGINE_COUNTERS)
    assert [r.histogram for r in counted] == [None, None]
    rows = case_results(_cases(2), counted, None, k=3, temperature=0.0, per_case=False)
    assert [(r["outcome"], r["drafts"], r["accepted_per_position"]) for r in rows] == [
        ("ok", None, None),
        ("ok", None, None),
    ]


def test_a_timed_cost_ratio_from_counters_uses_the_counted_steps() -> None:
    # 2 cases, 0.4 s of decode each over the counters' 40 steps: 20 ms a step; the
    # baseline's 2 x 15 tokens after the first in 0.3 s: 10 ms a token; c = (2 - 1) / 3.
    spec = [CaseRun(None, 5, 16, 0.4, "p", "c") for _ in range(2)]
    base = [CaseRun([], 16, 16, 0.15, "p", "c") for _ in range(2)]
    version = {"target_ref": "", "draft_ref": ""}
    ratio, source = choose_cost_ratio(version, 3, spec, base, given=None, spec_steps=40)
    assert ratio == pytest.approx(1 / 3)
    assert "over 40 steps" in source
    with pytest.raises(EvaluationError, match="no decode steps were timed"):
        choose_cost_ratio(version, 3, spec, base, given=None)
