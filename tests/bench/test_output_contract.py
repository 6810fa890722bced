"""The output-contract bench: its false alarms and delays come from the guard's own test."""

from pathlib import Path

from bench.output_contract import SCENARIOS, main, run


def test_a_broken_pair_is_caught_and_a_correct_one_is_not() -> None:
    by_name = {s.mismatch: s for s in SCENARIOS if not s.sampled}
    correct = run(by_name[0.0], runs=200, windows=200, pairs=5, seed=1)
    assert (correct.alarms, correct.delays) == (0, [])
    broken = run(by_name[0.9], runs=200, windows=200, pairs=5, seed=2)
    assert broken.alarms == 200 and max(broken.delays) <= 2


def test_sampled_pairs_split_evenly_pass_and_a_skewed_split_is_caught() -> None:
    sampled = {s.mismatch: s for s in SCENARIOS if s.sampled}
    even = run(sampled[0.5], runs=200, windows=200, pairs=5, seed=3)
    assert (even.alarms, even.delays) == (0, [])
    cold = run(sampled[0.95], runs=200, windows=200, pairs=5, seed=4)
    assert cold.alarms == 200 and max(cold.delays) <= 30
    lower = run(sampled[0.2], runs=200, windows=200, pairs=5, seed=5)
    assert lower.alarms == 200


def test_the_command_writes_its_section(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Other\n\nkept\n")
    assert main(["--runs", "20", "--windows", "50", "--write-results", str(results)]) == 0
    text = results.read_text()
    assert "## Other\n\nkept" in text
    assert "## Output contract in production" in text
    assert "| broken: 20 % of pairs differ | 20.0% | 20 |" in text
