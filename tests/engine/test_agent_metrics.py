"""Parsing vLLM's /metrics text: the cases one real server does not show (several engines,
no speculation, a server whose counters have not started)."""

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
