"""Output-contract checks shared by the engine tests: greedy token ids and a G test
of homogeneity on the first two sampled tokens (see test_output_contract.py)."""

from collections import Counter

import httpx
from scipy import stats

from engine.pools.probe_prompts import CODE_PROMPTS, PROSE_PROMPTS
from tests.fixtures.vllm import RunningServer

GREEDY_PROMPTS = 24
GREEDY_TOKENS = 64
# Prompts whose next-token distributions are neither flat nor near-deterministic.
DIST_PROMPTS = (CODE_PROMPTS[0], CODE_PROMPTS[3], PROSE_PROMPTS[0], PROSE_PROMPTS[4])
SAMPLES_PER_PROMPT = 600  # 2,400 continuations per pool
SAMPLES_PER_REQUEST = 200
ALPHA = 0.001
MIN_CELL = 10  # pooled count below which an outcome joins its prompt's "rare" cell

Outcome = tuple[int, ...]


def complete(server: RunningServer, body: dict[str, object]) -> dict[str, object]:
    payload = {"model": server.model, "return_token_ids": True, **body}
    response = httpx.post(f"{server.base_url}/v1/completions", json=payload, timeout=300)
    assert response.status_code == 200, response.text
    result: dict[str, object] = response.json()
    return result


def greedy_token_ids(server: RunningServer, prompts: list[str]) -> list[list[int]]:
    body = complete(
        server,
        {"prompt": prompts, "max_tokens": GREEDY_TOKENS, "temperature": 0, "ignore_eos": True},
    )
    choices = body["choices"]
    assert isinstance(choices, list)
    return [list(c["token_ids"]) for c in sorted(choices, key=lambda c: c["index"])]


def sample_pairs(server: RunningServer, temperature: float) -> list[Counter[Outcome]]:
    """Per prompt, counts of (token 1, token 2) over SAMPLES_PER_PROMPT continuations."""
    per_prompt: list[Counter[Outcome]] = []
    for prompt in DIST_PROMPTS:
        counts: Counter[Outcome] = Counter()
        for _ in range(SAMPLES_PER_PROMPT // SAMPLES_PER_REQUEST):
            body = complete(
                server,
                {
                    "prompt": prompt,
                    "max_tokens": 2,
                    "temperature": temperature,
                    "n": SAMPLES_PER_REQUEST,
                    "ignore_eos": True,
                },
            )
            for choice in body["choices"]:  # type: ignore[attr-defined]
                ids = tuple(choice["token_ids"])
                assert len(ids) == 2
                counts[ids] += 1
        per_prompt.append(counts)
    return per_prompt


RARE = -1  # stands for "any token that is rare at this position"


def coarsen(a: Counter[Outcome], b: Counter[Outcome]) -> tuple[Counter[Outcome], Counter[Outcome]]:
    """Map tokens rare at their position (pooled over both samples) to RARE.

    Keeps the joint structure of the frequent tokens while making the cells
    big enough for the chi-square approximation; the map is the same for both
    samples, so equal distributions stay equal after it.
    """
    per_position: list[Counter[int]] = [Counter(), Counter()]
    for counts in (a, b):
        for outcome, n in counts.items():
            for pos, token in enumerate(outcome):
                per_position[pos][token] += n

    def key(outcome: Outcome) -> Outcome:
        return tuple(
            t if per_position[pos][t] >= MIN_CELL else RARE for pos, t in enumerate(outcome)
        )

    out_a: Counter[Outcome] = Counter()
    out_b: Counter[Outcome] = Counter()
    for counts, out in ((a, out_a), (b, out_b)):
        for outcome, n in counts.items():
            out[key(outcome)] += n
    return out_a, out_b


def homogeneity_p_value(a: list[Counter[Outcome]], b: list[Counter[Outcome]]) -> float:
    """G test that two pools' joint two-token outcomes have the same distribution.

    One contingency table per prompt: tokens rare at their position are
    coarsened to RARE, then joint cells still under MIN_CELL are pooled into one
    cell. G statistics and degrees of freedom add across prompts because prompts
    are sampled independently.
    """
    g_total, dof_total = 0.0, 0
    for raw_a, raw_b in zip(a, b, strict=True):
        counts_a, counts_b = coarsen(raw_a, raw_b)
        outcomes = set(counts_a) | set(counts_b)
        common = sorted(o for o in outcomes if counts_a[o] + counts_b[o] >= MIN_CELL)
        rare = [o for o in outcomes if counts_a[o] + counts_b[o] < MIN_CELL]
        row_a = [counts_a[o] for o in common]
        row_b = [counts_b[o] for o in common]
        rare_a, rare_b = sum(counts_a[o] for o in rare), sum(counts_b[o] for o in rare)
        if rare_a + rare_b > 0:
            row_a.append(rare_a)
            row_b.append(rare_b)
        if len(row_a) < 2:
            continue  # one outcome only: nothing to compare
        g, _, dof, _ = stats.chi2_contingency([row_a, row_b], lambda_="log-likelihood")
        g_total += float(g)
        dof_total += int(dof)
    assert dof_total > 0, "no prompt had two distinct outcomes: the test has no power"
    return float(stats.chi2.sf(g_total, dof_total))
