"""Benchmark harness: side-by-side measurements recorded in bench/RESULTS.md."""
