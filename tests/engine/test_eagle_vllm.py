"""A second speculation method end to end on real vLLM: the bundled EAGLE-1 head.

The head (`engine/tiny_pair/eagle`, built by `specroute engine train-tiny-eagle`)
drafts from the tiny target's own features. It must keep the output contract the
draft-model pair keeps: greedy tokens identical to the baseline's, and the first
two sampled tokens at T=1 distributed as the baseline's (the same G test as
test_output_contract.py, against the same baseline sample). Its acceptance is
read from the engine's own counters: it has to be above zero for the run to
have tested the rejection path at all.
"""

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.pools.local import tiny_eagle_pool
from engine.pools.probe_prompts import mixed_prompts
from engine.tiny.measure import parse_spec_counters
from tests.engine.contract_checks import (
    ALPHA,
    GREEDY_PROMPTS,
    GREEDY_TOKENS,
    Outcome,
    greedy_token_ids,
    homogeneity_p_value,
    sample_pairs,
)
from tests.fixtures.vllm import RunningServer, require_tiny_pair, start_tiny_server

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def eagle_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = require_tiny_pair()
    if not (root / "eagle" / "config.json").is_file():
        pytest.fail(f"the bundled EAGLE head is missing under {root / 'eagle'}")
    running = start_tiny_server(tiny_eagle_pool(root), Path(tmp_path_factory.mktemp("eagle")))
    try:
        yield running
    finally:
        running.stop()


def test_eagle_greedy_output_is_the_baseline_token_for_token(
    eagle_server: RunningServer, vllm_baseline_server: RunningServer
) -> None:
    prompts = mixed_prompts(GREEDY_PROMPTS)
    eagle = greedy_token_ids(eagle_server, prompts)
    baseline = greedy_token_ids(vllm_baseline_server, prompts)
    assert [len(ids) for ids in eagle] == [GREEDY_TOKENS] * GREEDY_PROMPTS
    mismatched = [i for i, (e, b) in enumerate(zip(eagle, baseline, strict=True)) if e != b]
    assert mismatched == [], f"EAGLE and baseline differ on prompts {mismatched}"
    metrics = httpx.get(f"{eagle_server.base_url}/metrics", timeout=10).text
    counters = parse_spec_counters(metrics, 3)
    assert counters.drafts > 0
    assert 0 < counters.accepted <= counters.draft_tokens
    print(f"EAGLE T=0 acceptance {counters.accepted / counters.draft_tokens:.3f}")


def test_eagle_sampled_distribution_matches_baseline(
    eagle_server: RunningServer, baseline_t1: list[Counter[Outcome]]
) -> None:
    eagle_t1 = sample_pairs(eagle_server, temperature=1.0)
    assert sum(sum(c.values()) for c in eagle_t1) >= 2000
    p = homogeneity_p_value(eagle_t1, baseline_t1)
    print(f"EAGLE T=1 vs baseline T=1: G test p = {p:.3g}")
    assert p > ALPHA, f"EAGLE T=1 differs from baseline T=1 (p={p:.2e})"
