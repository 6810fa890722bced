"""The offline acceptance evaluator against closed forms and a reference simulation."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from transformers import LlamaForCausalLM

from engine.tiny.evaluate import (
    acceptance_probability,
    estimate_greedy,
    estimate_sampled,
    greedy_agreement,
    greedy_windows,
    positional_products,
)
from engine.tiny.models import build_model
from engine.tiny.shapes import ModelShape


def test_acceptance_probability_is_one_minus_total_variation() -> None:
    g = torch.Generator().manual_seed(0)
    target = torch.randn(64, 50, generator=g) * 3  # [positions, vocab]
    draft = torch.randn(64, 50, generator=g) * 3
    for temperature in (0.5, 1.0, 1.3):
        p = torch.softmax(target / temperature, dim=-1)
        q = torch.softmax(draft / temperature, dim=-1)
        tv = 0.5 * (p - q).abs().sum(dim=-1)
        got = acceptance_probability(target, draft, temperature)
        torch.testing.assert_close(got, 1 - tv, rtol=0, atol=1e-6)
    same = acceptance_probability(target, target, 1.0)
    torch.testing.assert_close(same, torch.ones(64), rtol=0, atol=1e-6)


def test_acceptance_probability_on_a_hand_example() -> None:
    # p = (0.5, 0.5, 0), q = (0.25, 0.25, 0.5): sum min = 0.5.
    p = torch.tensor([0.5, 0.5, 1e-30]).log()
    q = torch.tensor([0.25, 0.25, 0.5]).log()
    assert float(acceptance_probability(p, q, 1.0)) == pytest.approx(0.5, abs=1e-6)


def test_acceptance_probability_matches_simulated_speculative_sampling() -> None:
    """Draw x ~ q and accept with min(1, p(x)/q(x)), as the rejection sampler does."""
    g = torch.Generator().manual_seed(1)
    target, draft = torch.randn(12, generator=g) * 2, torch.randn(12, generator=g) * 2
    temperature = 1.3
    p = torch.softmax(target / temperature, dim=-1)
    q = torch.softmax(draft / temperature, dim=-1)
    n = 200_000
    x = torch.multinomial(q, n, replacement=True, generator=g)
    accept = torch.rand(n, generator=g) < torch.clamp(p[x] / q[x], max=1.0)
    expected = float(acceptance_probability(target, draft, temperature))
    # Two-sided binomial test: the closed form must not be rejected at 0.001.
    result = stats.binomtest(int(accept.sum()), n, expected)
    assert result.pvalue > 1e-3, (float(accept.float().mean()), expected)


def test_greedy_windows_on_a_hand_example() -> None:
    agree = torch.tensor([1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1], dtype=torch.bool)
    # t=0: 2 accepted, next t=3; t=3: 3 accepted (cap), t=7: 0, t=8: 0, t=9: 3 (fits: 9+3<=12).
    assert greedy_windows(agree, k=3) == [2, 3, 0, 0, 3]
    assert greedy_windows(torch.ones(8, dtype=torch.bool), k=3) == [3, 3]


def _speculative_greedy_reference(
    target_next: list[list[int]], draft_next: list[list[int]], start: int, length: int, k: int
) -> list[int]:
    """Greedy speculative decoding on toy bigram "models": next = table[last token].

    The draft proposes k tokens autoregressively from its own proposals; the
    target accepts the longest matching prefix and then emits its own token.
    """
    seq = [start]
    accepted_counts: list[int] = []
    while len(seq) - 1 + k <= length:
        proposal, last = [], seq[-1]
        for _ in range(k):
            last = draft_next[last][0]
            proposal.append(last)
        n, last = 0, seq[-1]
        for token in proposal:
            if target_next[last][0] != token:
                break
            n += 1
            last = token
        seq += [*proposal[:n], target_next[last][0]]
        accepted_counts.append(n)
    return accepted_counts


@settings(max_examples=40, deadline=None)
@given(
    target=st.lists(st.integers(0, 5), min_size=6, max_size=6),
    draft=st.lists(st.integers(0, 5), min_size=6, max_size=6),
    k=st.integers(1, 4),
)
def test_greedy_windows_equal_speculative_decoding(
    target: list[int], draft: list[int], k: int
) -> None:
    length = 40
    # Toy bigram logits: one-hot rows, so argmax[token] = table[token].
    target_logits = torch.nn.functional.one_hot(torch.tensor(target), 6).float()  # [6, 6]
    draft_logits = torch.nn.functional.one_hot(torch.tensor(draft), 6).float()
    path = [0]
    for _ in range(length):
        path.append(target[path[-1]])
    prev = torch.tensor(path[:-1])  # [length]: token each prediction conditions on
    agree = greedy_agreement(target_logits[prev], draft_logits[prev])
    reference = _speculative_greedy_reference(
        [[t] for t in target], [[d] for d in draft], 0, length, k
    )
    assert greedy_windows(agree, k) == reference


def test_positional_products_closed_form_for_constant_beta() -> None:
    beta, k = 0.7, 3
    per_position = positional_products(torch.full((100,), beta), k)
    torch.testing.assert_close(per_position, torch.tensor([beta**j for j in range(1, k + 1)]))
    mean_length = 1 + float(per_position.sum())
    assert mean_length == pytest.approx((1 - beta ** (k + 1)) / (1 - beta), rel=1e-6)


def _tiny_llama(seed: int, layers: int) -> LlamaForCausalLM:
    return build_model(
        ModelShape(64, layers, 128), vocab_size=64, max_positions=128, eos_id=0, seed=seed
    )


def test_model_estimates_on_identical_and_different_models() -> None:
    target, other = _tiny_llama(0, 2), _tiny_llama(1, 1)
    # NOTE: with tied, freshly initialised embeddings both models mostly predict
    # the token they just read; scrambling the final norm breaks that symmetry.
    with torch.no_grad():
        other.model.norm.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(2))
    prompts = [torch.tensor([0, 5, 9, 3]), torch.tensor([0, 7, 7, 1, 2])]
    k = 3
    itself = estimate_greedy(target, target, prompts, k, new_tokens=20)
    assert itself.mean_acceptance_length == k + 1
    assert itself.per_position == [1.0, 1.0, 1.0]

    different = estimate_greedy(target, other, prompts, k, new_tokens=20)
    assert 1.0 <= different.mean_acceptance_length < k + 1
    # Per-position acceptance can only fall along a window.
    assert different.per_position == sorted(different.per_position, reverse=True)

    windows = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(0))
    sampled_self = estimate_sampled(target, target, windows, k, temperature=1.3)
    assert sampled_self.per_token == pytest.approx(1.0, abs=1e-5)
    sampled = estimate_sampled(target, other, windows, k, temperature=1.3)
    assert 0.0 < sampled.per_token < 1.0
    assert sampled.mean_acceptance_length == pytest.approx(1 + sum(sampled.per_position))
    assert not math.isnan(sampled.per_token)
