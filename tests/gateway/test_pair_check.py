"""Paired output checks: which requests are sampled, how two answers compare (greedy:
token for token; sampled: which arm's completion the target scored higher), and what
telemetry keeps of them (counts and ids, no text)."""

import json
from typing import Any

import pytest

from gateway.decision.decide import Decision, DecisionInput, decide
from gateway.decision.features import request_features
from gateway.proxy.pair_check import (
    compare,
    compare_sampled,
    completions_of,
    pair_body,
    sampled_logprobs_of,
)
from gateway.proxy.schemas import ChatCompletionBody
from gateway.telemetry import TelemetryAggregator
from gateway.telemetry.pair_record import PairOutcome, PairRecord, SampledOutcome
from specwire import MAX_MISMATCH_IDS, Arm, RolloutState
from tests.gateway.policy import BASELINE_POOL, ROLLOUT_ID, SPEC_POOL, make_snapshot


def _decide(body: dict[str, Any], key: str, **snap: Any) -> Decision:
    snapshot = make_snapshot(
        spec_urls=["http://127.0.0.1:1"], baseline_urls=["http://127.0.0.1:2"], **snap
    )
    parsed = ChatCompletionBody.model_validate(
        {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], **body}
    )
    tenant = snapshot.tenants[0]
    return decide(
        DecisionInput(
            snapshot=snapshot,
            snapshot_age_s=0.0,
            tenant=tenant,
            features=request_features(parsed, tenant=tenant.name, task=None),
            body=parsed,
            cohort_key=key,
            request_id=key,
        )
    )


@pytest.mark.parametrize("state", [RolloutState.SHADOW, RolloutState.CANARY, RolloutState.FULL])
def test_greedy_requests_are_paired_at_the_rollouts_share_on_either_arm(
    state: RolloutState,
) -> None:
    keys = [f"req-{i}" for i in range(400)]
    paired = [
        d
        for d in (
            _decide({"temperature": 0}, k, state=state, percentage=50.0, contract_percentage=25.0)
            for k in keys
        )
        if d.pair_check is not None
    ]
    # 25 % of 400, drawn by hash: within a few standard deviations (sd ~ 8.7).
    assert 70 <= len(paired) <= 130
    assert {(s.id, b.id) for s, b in (d.pair_check for d in paired if d.pair_check)} == {
        (SPEC_POOL, BASELINE_POOL)
    }
    if state is RolloutState.CANARY:
        # Callers of both arms are checked alike.
        assert {d.arm for d in paired} == {Arm.SPEC, Arm.BASELINE}


def test_single_choice_requests_are_paired_at_any_temperature() -> None:
    on = {"state": RolloutState.CANARY, "percentage": 50.0, "contract_percentage": 100.0}
    assert _decide({"temperature": 0}, "k", **on).pair_check is not None
    assert _decide({"temperature": 0.7}, "k", **on).pair_check is not None
    assert _decide({}, "k", **on).pair_check is not None  # the engine's default: sampled
    assert _decide({"temperature": 0, "n": 2}, "k", **on).pair_check is None
    assert _decide({"temperature": 0.7, "n": 2}, "k", **on).pair_check is None
    off = {**on, "contract_percentage": 0.0}
    assert _decide({"temperature": 0}, "k", **off).pair_check is None
    paused = {**on, "state": RolloutState.PAUSED}
    assert _decide({"temperature": 0.7}, "k", **paused).pair_check is None


def test_pair_body_is_non_streamed_and_asks_for_token_ids() -> None:
    body = pair_body(
        {"model": "tiny", "temperature": 0, "stream": True, "stream_options": {"a": 1}, "x": 2}
    )
    assert body == b'{"model":"tiny","temperature":0,"x":2,"stream":false,"return_token_ids":true}'


def test_a_sampled_pair_body_drops_the_seed_and_asks_for_logprobs() -> None:
    completion = pair_body({"model": "m", "prompt": "p", "temperature": 0.8, "seed": 7})
    assert json.loads(completion) == {
        "model": "m",
        "prompt": "p",
        "temperature": 0.8,
        "stream": False,
        "return_token_ids": True,
        "logprobs": 0,
    }
    # The caller's own top-k stays (a superset of what the check reads).
    assert json.loads(pair_body({"model": "m", "prompt": "p", "logprobs": 3}))["logprobs"] == 3
    chat = json.loads(pair_body({"model": "m", "messages": [], "temperature": 1.0}))
    assert chat["logprobs"] is True and "seed" not in chat


def test_sampled_answers_compare_by_the_mean_logprob_after_the_first_token() -> None:
    completions = {"choices": [{"index": 0, "logprobs": {"token_logprobs": [-0.1, -1.0, -3.0]}}]}
    chat = {
        "choices": [{"index": 0, "logprobs": {"content": [{"logprob": -0.1}, {"logprob": -0.5}]}}]
    }
    assert sampled_logprobs_of(completions) == [-0.1, -1.0, -3.0]
    assert sampled_logprobs_of(chat) == [-0.1, -0.5]
    # After the first token (the prefill's, alike on both arms): mean -2.0 vs -0.5.
    assert compare_sampled([-0.1, -1.0, -3.0], [-9.0, -0.5]) == SampledOutcome(-1)
    assert compare_sampled([-9.0, -0.5], [-0.1, -1.0, -3.0]) == SampledOutcome(1)
    assert compare_sampled([-1.0, -2.0], [-5.0, -2.0]) == SampledOutcome(0)  # a tie
    assert compare_sampled([-1.0], [-5.0, -2.0]) == SampledOutcome(0)  # one token: nothing
    for bad in (
        {"choices": [{"index": 0, "text": "x"}]},
        {"choices": [{"index": 0, "logprobs": {"token_logprobs": [-1.0, None]}}]},
        {"error": "x"},
    ):
        with pytest.raises(ValueError):
            sampled_logprobs_of(bad)


def test_compare_on_token_ids_and_on_text() -> None:
    same = completions_of({"choices": [{"index": 0, "token_ids": [1, 2, 3], "text": "abc"}]})
    assert same == [(1, 2, 3)]
    assert compare(same, [(1, 2, 3)]) == PairOutcome(True, None)
    assert compare(same, [(1, 9, 3)]) == PairOutcome(False, 1)
    assert compare(same, [(1, 2)]) == PairOutcome(False, 2)  # a prefix: ends early
    chat = completions_of({"choices": [{"index": 0, "message": {"content": "hello"}}]})
    assert chat == ["hello"]
    assert compare(chat, ["help!"]) == PairOutcome(False, 3)
    # Token ids on one side only: unequal, nothing finer to say.
    assert compare(same, ["abc"]) == PairOutcome(False, 0)
    # Choices are compared in index order, positions counted across them.
    two = completions_of(
        {"choices": [{"index": 1, "token_ids": [7, 8]}, {"index": 0, "token_ids": [5]}]}
    )
    assert two == [(5,), (7, 8)]
    assert compare(two, [(5,), (7, 0)]) == PairOutcome(False, 2)
    with pytest.raises(ValueError, match="no choices"):
        completions_of({"error": "x"})


def _pair(
    request_id: str, outcome: PairOutcome | SampledOutcome | None, at: float = 1000.5
) -> PairRecord:
    return PairRecord(
        request_id=request_id,
        segment_id=7,
        pair_version_id=3,
        rollout_id=ROLLOUT_ID,
        finished_at=at,
        outcome=outcome,
    )


def test_aggregator_counts_pairs_on_the_rollouts_spec_window() -> None:
    agg = TelemetryAggregator("gw", 10, 8)
    agg.record_pair(_pair("a", PairOutcome(True, None)))
    agg.record_pair(_pair("b", PairOutcome(False, 4)))
    agg.record_pair(_pair("c", PairOutcome(False, 10)))
    agg.record_pair(_pair("d", None))
    for i in range(MAX_MISMATCH_IDS + 5):
        agg.record_pair(_pair(f"m{i}", PairOutcome(False, 1), at=1010.5))
    first, second = agg.drain_all()
    [window] = first.windows
    assert (window.arm, window.segment_id, window.pair_version_id, window.rollout_id) == (
        Arm.SPEC,
        7,
        3,
        ROLLOUT_ID,
    )
    # A window with checks and no request: 0 requests, only the contract's counts.
    assert window.requests == 0
    c = window.output_contract
    assert (c.pairs, c.equal, c.incomplete, c.divergence_sum) == (3, 1, 1, 14)
    assert c.mismatched_ids == ["b", "c"]
    [later] = second.windows
    assert later.output_contract.pairs == MAX_MISMATCH_IDS + 5
    assert later.output_contract.mismatched_ids == [f"m{i}" for i in range(MAX_MISMATCH_IDS)]


def test_aggregator_counts_sampled_pairs_by_direction_with_their_ids() -> None:
    agg = TelemetryAggregator("gw", 10, 8)
    for i, sign in enumerate([1, 1, -1, 0, 1]):
        agg.record_pair(_pair(f"s{i}", SampledOutcome(sign)))
    for i in range(MAX_MISMATCH_IDS + 3):
        agg.record_pair(_pair(f"h{i}", SampledOutcome(1), at=1010.5))
    first, second = agg.drain_all()
    [window] = first.windows
    c = window.output_contract
    assert (c.pairs, c.sampled_spec_higher, c.sampled_spec_lower, c.sampled_ties) == (0, 3, 1, 1)
    assert (c.sampled_higher_ids, c.sampled_lower_ids) == (["s0", "s1", "s4"], ["s2"])
    [later] = second.windows
    assert later.output_contract.sampled_spec_higher == MAX_MISMATCH_IDS + 3
    assert len(later.output_contract.sampled_higher_ids) == MAX_MISMATCH_IDS
