"""The committed pair through a real vLLM server: the acceptance the card promises."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.pools.launcher import LaunchOptions, build_server_command
from engine.pools.server import VllmServer
from engine.tiny.corpus import Kind, build_corpus
from engine.tiny.measure import Measurement, measure_server, parse_spec_counters, pool_spec
from engine.tiny.prompts import held_out_prompts

PAIR = Path(__file__).resolve().parents[2] / "engine" / "tiny_pair"
K = 3

METRICS_PAGE = """\
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 10.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 30.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 17.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="0"} 8.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="1"} 6.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="2"} 3.0
"""


def test_parse_spec_counters_reads_the_prometheus_page() -> None:
    c = parse_spec_counters(METRICS_PAGE, K)
    assert (c.drafts, c.draft_tokens, c.accepted) == (10.0, 30.0, 17.0)
    assert c.accepted_per_position == (8.0, 6.0, 3.0)
    assert c.minus(c).drafts == 0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    command = build_server_command(pool_spec(PAIR, K, "greedy"), 8391, LaunchOptions())
    srv = VllmServer(command, tmp_path_factory.mktemp("vllm") / "server.log")
    srv.start()
    try:
        srv.wait_ready(timeout=600)
        yield srv
    finally:
        srv.stop()


@pytest.mark.vllm
@pytest.mark.slow
def test_code_at_t0_meets_the_bar_and_prose_and_t13_are_lower(server: VllmServer) -> None:
    corpus = build_corpus()
    prompts: dict[Kind, list[str]] = {
        kind: held_out_prompts(corpus, kind, 8) for kind in ("code", "prose")
    }
    results: list[Measurement] = asyncio.run(
        measure_server(server.base_url, server.model, prompts, [0.0, 1.3], K, "greedy")
    )
    by = {(m.kind, m.temperature): m for m in results}
    code, prose, code_hot = by["code", 0.0], by["prose", 0.0], by["code", 1.3]
    assert code.completion_tokens == 8 * 64
    assert code.drafts > 0 and code.draft_tokens == K * code.drafts
    print({key: round(m.mean_acceptance_length, 3) for key, m in by.items()})
    assert code.mean_acceptance_length >= 2.0
    # The demo's segments must differ: prose and hot sampling speculate visibly worse.
    assert prose.mean_acceptance_length < code.mean_acceptance_length - 0.25
    assert code_hot.mean_acceptance_length < code.mean_acceptance_length - 0.25
    # Position j can only be accepted when every earlier one was.
    assert code.per_position == sorted(code.per_position, reverse=True)
