"""The long form of the fleet fault run (the short form is tests/bench/fleet/test_fleet.py).

    python -m bench.fleet                          # long form: 12 streams, 15 s partition
    python -m bench.fleet --concurrency 6 --partition-s 5 --flips 4 --json out.json

Needs root (network namespaces), haproxy and redis-server (Debian), and the
machine's PostgreSQL and RabbitMQ on 127.0.0.1. Prints one line per fault and
the totals; `--json` writes the whole report.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from bench.fleet.netns import available
from bench.fleet.run import FleetReport, RunOptions, run
from bench.fleet.stack import Fleet, FleetOptions


def render(report: FleetReport) -> str:
    lines = [
        f"{'fault':34} {'requests':>8} {'failed':>6} {'in flight':>9}  errors / measures",
    ]
    for f in report.faults:
        extra = ", ".join(f"{k}={_short(v)}" for k, v in f.extra.items())
        errors = ", ".join(f"{k}×{v}" for k, v in f.errors.items())
        lines.append(
            f"{f.name:34} {f.requests:8d} {f.failed:6d} {f.failed_in_flight:9d}  "
            f"{'; '.join(x for x in (errors, extra) if x)}"
        )
    lines += [
        f"requests {report.requests}, served {report.served}; lost writes {report.lost_writes} "
        f"(+{report.lost_with_killed_gateway} in the SIGKILLed gateway's unflushed window); "
        f"duplicate records {report.duplicate_records}; duplicate flips {report.duplicate_flips}",
        f"quota: {report.quota_served_tokens} tokens served of a {report.quota_budget} budget "
        f"= {report.quota_ratio:.3f}x ({report.quota_refused} refused with 429)",
        f"flip propagation to every gateway: p50 {report.propagation(50):.0f} ms, "
        f"p99 {report.propagation(99):.0f} ms ({len(report.propagation_ms)} samples); "
        f"guard flip {report.flip_after_release_s:.2f} s after the lost worker's lock was freed",
        f"partitioned engine host routed around after {report.route_around_s:.2f} s; "
        f"serving again {_short(report.rejoin_s)} s after its link came back",
        f"requests sent during the partition: {len(report.partition_waits_s)}, "
        f"{report.partition_sent_failed} failed; took p50 {report.partition_wait(50):.3f} s, "
        f"p99 {report.partition_wait(99):.3f} s, max "
        f"{max(report.partition_waits_s, default=float('nan')):.3f} s",
        f"wall {report.wall_s:.0f} s; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]
    return "\n".join(lines)


def _short(v: object) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--concurrency", type=int, default=12)
    p.add_argument("--dwell-s", type=float, default=8.0)
    p.add_argument("--partition-s", type=float, default=15.0)
    p.add_argument("--flips", type=int, default=30)
    p.add_argument("--quota-requests", type=int, default=200)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--no-restart", action="store_true", help="leave killed replicas dead")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    reason = available()
    if reason is not None:
        sys.exit(f"cannot run the fleet: {reason}")
    options = RunOptions(
        concurrency=a.concurrency,
        warm_s=3.0,
        dwell_s=a.dwell_s,
        partition_s=a.partition_s,
        flips=a.flips,
        quota_requests=a.quota_requests,
        restart=not a.no_restart,
    )
    started = time.monotonic()
    with Fleet(FleetOptions(tokens=a.tokens)) as fleet:
        print(f"fleet up in {time.monotonic() - started:.1f} s", flush=True)
        report = run(fleet, options)
    print(render(report))
    if a.json:
        a.json.write_text(json.dumps(report.as_json(), indent=2))


if __name__ == "__main__":
    main()
