"""The decision scenario suite: is the automation right, fast, and still watching?

A traffic simulator (per-arm acceptance with within-request correlation,
latency that depends on each worker's load at dispatch, error rates, heavy-tailed
stalls, bursty stream delivery) feeds telemetry windows through the real control
plane's ingestion, heartbeats through the real heartbeat service, and runs the
real Celery tasks (guards, evaluation, probation) on a virtual clock, with the
production cadence: 10 s windows, guards every 15 s, evaluation every 60 s.

Dispatch: by default every request goes through the gateway's own balancer
(`gateway.routing.balancer.Balancer`, least outstanding) over pools of N workers,
in continuous time (dispatch.py); `--dispatch random` draws each request's load
as Poisson around the pool's per-worker concurrency instead.

`python -m bench.decisions --runs 200 --workers 1,4,8,16` runs every scenario at
each pool size and writes the "Decision quality" section of bench/RESULTS.md with
`--write-results`; `--start full` has an admin take each rollout to full before
its first window, so the monitors after full are measured even where the canary's
verdicts never get there; tests/bench/test_decisions*.py run a small subset in `make test`.
"""
