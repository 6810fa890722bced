"""The decision scenario suite: is the automation right, fast, and still watching?

A traffic simulator (per-arm acceptance with within-request correlation,
latency that depends on each worker's load through Little's law, error rates,
bursty stream delivery) feeds telemetry windows through the real control
plane's ingestion, heartbeats through the real heartbeat service, and runs the
real Celery tasks (guards, evaluation, probation) on a virtual clock, with the
production cadence: 10 s windows, guards every 15 s, evaluation every 60 s.

`python -m bench.decisions --runs 200` runs every scenario and writes the
"Decision quality" section of bench/RESULTS.md; tests/bench/test_decisions.py
runs a small subset in `make test`.
"""
