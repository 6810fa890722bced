"""The open-loop break-even harness on a short run against the session's real servers."""

import asyncio
from pathlib import Path

import pytest

from bench.break_even import ArmServer, Segment, predicted_speedup, run_cell, speedups
from bench.break_even_cli import plot, table
from bench.results import write_section
from engine.pools.probe_prompts import CODE_PROMPTS
from tests.fixtures.vllm import RunningServer


def test_closed_form_and_percentiles_are_exact() -> None:
    assert predicted_speedup(3.0, 3, 0.0) == 3.0
    assert predicted_speedup(2.5, 3, 0.5) == pytest.approx(2.5 / 2.5)


@pytest.mark.vllm
def test_a_short_open_loop_run_measures_both_arms_and_reports(
    vllm_spec_server: RunningServer, vllm_baseline_server: RunningServer, tmp_path: Path
) -> None:
    segment = Segment("code T=0", CODE_PROMPTS, 0.0)
    arms = [
        ArmServer(
            "baseline", vllm_baseline_server.base_url, "tiny", 0, vllm_baseline_server.process.pid
        ),
        ArmServer("draft k=3", vllm_spec_server.base_url, "tiny", 3, vllm_spec_server.process.pid),
    ]
    cells = [asyncio.run(run_cell(arm, segment, 4.0, 2.0, 16, seed=1)) for arm in arms]
    base, spec = cells
    # the same seed: the same Poisson arrivals against both arms
    assert len(base.traces) == len(spec.traces) > 0
    assert base.errors == spec.errors == 0
    assert all(t.completion_tokens == 16 for c in cells for t in c.traces)
    assert base.tau is None and base.target_passes_per_token == 1.0
    assert spec.tau is not None and 1.0 < spec.tau <= 4.0
    # a draft model drafts at every decode step: one pass per prefill and per draft
    n = len(spec.traces)
    assert spec.target_passes == n + spec.drafts
    assert spec.target_passes_per_token == pytest.approx((n + spec.drafts) / spec.tokens)
    assert 1 / spec.tau <= spec.target_passes_per_token < 1.0
    assert base.drafted_share is None and spec.drafted_share == 1.0
    # the baseline: a prefill and then one pass per token
    assert base.target_passes == base.tokens
    assert base.cpu_s > 0 and spec.cpu_s > 0
    ratio = speedups(cells)
    e2e_base, e2e_spec = base.e2e_per_token_s(), spec.e2e_per_token_s()
    assert e2e_base is not None and e2e_spec is not None
    assert ratio[("draft k=3", "code T=0", 4.0)] == pytest.approx(e2e_base / e2e_spec)

    lines = table(cells, c=0.3)
    assert len(lines) == 4 and "draft k=3" in lines[3]
    assert lines[0].count("|") == lines[3].count("|")
    pngs = plot(cells, 0.3, tmp_path)
    assert [p.name for p in pngs] == ["break_even_code_T0.png"] and pngs[0].stat().st_size > 5000
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Other\n\nkept\n")
    write_section(results, "## Break-even (open loop)\n\n" + "\n".join(lines))
    write_section(results, "## Break-even (open loop)\n\n" + "\n".join(lines))
    text = results.read_text()
    assert text.count("## Break-even (open loop)") == 1 and "kept" in text
