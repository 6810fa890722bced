"""The short form of the multi-host fault run (the long form: `python -m bench.fleet`).

Nine network-namespace hosts on one bridge run the real processes: haproxy,
three `specroute gateway serve` replicas on two hosts, two `specroute control
serve` replicas on a PostgreSQL database made for the run, two Celery workers
and beat on a RabbitMQ vhost made for the run, a private Redis, and fake OpenAI
engines with the real engine agent on two hosts. The real `openai` client
streams through haproxy while a gateway and a control replica are SIGKILLed, an
engine host is partitioned, Redis is paused and a Celery worker host is lost in
the middle of a flip (bench/fleet/run.py says how each is done and measured).
"""

import shutil

import pytest

from bench.fleet.netns import available
from bench.fleet.run import RunOptions, run
from bench.fleet.stack import Fleet, FleetOptions
from tests.fixtures.services import require_postgres, require_rabbitmq, unavailable

pytestmark = pytest.mark.postgres

OPTIONS = RunOptions(concurrency=6, warm_s=2.0, dwell_s=3.0, partition_s=5.0, flips=4)


def test_fleet_survives_host_and_process_faults() -> None:
    reason = available()
    if reason is not None:
        unavailable(f"no network namespaces: {reason}", what="capability")
    for tool in ("haproxy", "redis-server"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed (Debian package; `make tools`)", what="tool")
    require_postgres()
    require_rabbitmq()

    with Fleet() as fleet:
        report = run(fleet, OPTIONS)

    faults = {f.name: f for f in report.faults}
    assert report.served > 300, report.as_json()

    # Only requests in flight on the killed gateway fail, as connection errors.
    killed = faults["gateway replica SIGKILLed"]
    assert killed.failed == killed.failed_in_flight <= OPTIONS.concurrency, killed
    assert set(killed.errors) <= {
        "APIConnectionError",  # a stream cut mid-way
        "TruncatedStream",
        "InternalServerError:502",  # haproxy: the replica died before answering
    }, killed
    # The gateway never waits on control, nor on a paused Redis (local fallback).
    assert faults["control replica SIGKILLed"].failed == 0, faults
    assert faults["redis paused"].failed == 0, faults

    # A partitioned engine host: only the streams in flight on it may fail. A request
    # sent to it (a kept-alive connection, before the breaker opened) waits out the
    # response-header timeout and is served by the other host: none waits longer than
    # that timeout plus a normal request's time (and room for a busy machine).
    partition = faults["engine host partitioned"]
    assert partition.failed <= OPTIONS.concurrency, partition
    assert report.partition_waits_s and report.partition_sent_failed == 0, partition
    bound = FleetOptions().response_header_timeout_s + partition.extra["slow_threshold_s"] + 1.0
    assert max(report.partition_waits_s) < bound, (bound, partition)
    assert report.route_around_s < OPTIONS.partition_s, report.as_json()
    assert report.rejoin_s is not None and report.rejoin_s < 10, report.as_json()

    # The flip whose worker was lost happened exactly once.
    mid_flip = faults["celery worker host lost mid-flip"]
    assert mid_flip.extra["disable_decisions"] == 1 and report.duplicate_flips == 0, mid_flip
    assert mid_flip.extra["state_after_probation"] == "probation", mid_flip

    # Every gateway saw every flip (within 15 s, or run() fails), and soon: the Redis
    # wake-up, else the next 1 s poll. 0.3-0.6 s on a quiet 2-core machine; the bound
    # leaves room for a busy one (p99 5.9 s at load 21, bench/RESULTS.md "Fleet").
    # (the killed gateway stays down in the short form: two live replicas)
    assert len(report.propagation_ms) == 2 * (1 + OPTIONS.flips), report.propagation_ms
    assert report.propagation(50) < 3000, report.propagation_ms

    # Shared quota across replicas, and telemetry with no lost or double writes.
    assert 0.5 <= report.quota_ratio <= 1.1, report.as_json()
    assert report.quota_refused > 0, report.as_json()
    assert report.lost_writes == 0 and report.duplicate_records == 0, report.as_json()
