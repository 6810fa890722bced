"""The offline evaluation's arithmetic and prompt store, against references."""

import json
from pathlib import Path

import pytest

from control.stats import expected_speedup
from engine.evaluation.measure import Tally, expected_speedups, tokens_per_pass
from engine.evaluation.prompts import PromptStoreError, load_store, prompt_digest, resolve_cases


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
    with pytest.raises(PromptStoreError, match="only local files"):
        load_store("s3://bucket/prompts.jsonl")
