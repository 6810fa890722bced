"""Parsing vLLM's /metrics text: the cases one real server does not show (several engines,
no speculation, a server whose counters have not started)."""

from pathlib import Path

from engine.agent.metrics import parse_engine_metrics

TWO_ENGINES = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
vllm:num_requests_running{engine="1",model_name="tiny"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 1.0
vllm:num_requests_waiting{engine="1",model_name="tiny"} 4.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="tiny"} 0.625
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="tiny"} 5.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="tiny"} 1.7e+09
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 30.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="tiny"} 15.0
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 17.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="tiny"} 6.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="0"} 8.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="2"} 3.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="1"} 6.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="0"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="1"} 2.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="tiny",position="2"} 0.0
"""


def test_engines_are_summed_and_the_busiest_cache_counts() -> None:
    m = parse_engine_metrics(TWO_ENGINES)
    assert (m.running, m.waiting, m.kv_cache_usage) == (5, 5, 0.625)
    assert m.spec is not None
    assert (m.spec.num_drafts, m.spec.num_draft_tokens, m.spec.num_accepted_tokens) == (15, 45, 23)
    # positions arrive out of order; the list is by position
    assert m.spec.accepted_per_position == [12, 8, 3]
    assert sum(m.spec.accepted_per_position) == m.spec.num_accepted_tokens


def test_baseline_server_has_no_spec_counters() -> None:
    text = "\n".join(line for line in TWO_ENGINES.splitlines() if "spec_decode" not in line)
    m = parse_engine_metrics(text + "\n")
    assert m.spec is None and not m.speculating
    assert m.running == 5


def test_spec_server_before_its_first_draft_reports_zeroes() -> None:
    text = (
        "# TYPE vllm:spec_decode_num_drafts counter\n"
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 0.0\n'
    )
    m = parse_engine_metrics(text)
    assert m.spec is not None and m.spec.num_drafts == 0 and m.spec.accepted_per_position == []
    assert (m.running, m.waiting, m.kv_cache_usage) == (0, 0, 0.0)


def test_emitted_tokens_are_summed_over_engines_and_none_when_not_exported() -> None:
    text = TWO_ENGINES + (
        "# TYPE vllm:generation_tokens counter\n"
        'vllm:generation_tokens_total{engine="0",model_name="tiny"} 40.0\n'
        'vllm:generation_tokens_created{engine="0",model_name="tiny"} 1.7e+09\n'
        'vllm:generation_tokens_total{engine="1",model_name="tiny"} 2.0\n'
    )
    assert parse_engine_metrics(text).generation_tokens == 42
    assert parse_engine_metrics(TWO_ENGINES).generation_tokens is None


REAL_PAGE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_0_32_metrics_spec.txt"


def test_a_real_vllm_0_32_page_gives_steps_decode_time_and_kv_blocks() -> None:
    # The /metrics page of the bundled tiny pair's spec server (k=3) after two
    # sequential greedy requests of 48 tokens, as vLLM 0.32 on CPU exported it.
    m = parse_engine_metrics(REAL_PAGE.read_text())
    assert m.spec is not None and m.generation_tokens == 96
    assert (m.spec.num_drafts, m.spec.num_accepted_tokens) == (41, 53)
    assert (m.engine_steps, m.decode_requests) == (43, 2)
    assert m.decode_seconds is not None and abs(m.decode_seconds - 1.2465041630000542) < 1e-12
    assert (m.kv_blocks_total, m.kv_block_size, m.kv_blocks_used) == (819, 128, 0)
    # One request at a time: every engine step is one target pass of one sequence, and
    # each pass emits its accepted draft tokens plus one (the rule's passes = emitted -
    # accepted), two prefills plus one verify step per draft.
    assert m.engine_steps == m.generation_tokens - m.spec.num_accepted_tokens == 2 + 41


CACHE_INFO = (
    "# TYPE vllm:cache_config_info gauge\n"
    'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="100"} 1.0\n'
    'vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="200"} 1.0\n'
)


def test_kv_blocks_in_use_weigh_each_engines_usage_by_its_own_blocks() -> None:
    m = parse_engine_metrics(TWO_ENGINES + CACHE_INFO)
    # engine 0: 0.25 x 100, engine 1: 0.625 x 200
    assert (m.kv_blocks_total, m.kv_blocks_used, m.kv_block_size) == (300, 150, 16)
    # Without the info gauge (or with num_gpu_blocks="None"), no block figures at all.
    assert parse_engine_metrics(TWO_ENGINES).kv_blocks_total is None
    unset = CACHE_INFO.replace('num_gpu_blocks="100"', 'num_gpu_blocks="None"')
    assert parse_engine_metrics(TWO_ENGINES + unset).kv_blocks_total == 200
    assert parse_engine_metrics(TWO_ENGINES).engine_steps is None
