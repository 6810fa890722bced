"""Tally hostile inputs against an in-process control plane and a real gateway.

    python -m tests.hostile [--database-url postgresql+psycopg://...] [--per-operation 60]

Prints requests tried, statuses seen and the 5xx count (goal: 0) for
bench/RESULTS.md; exits 1 if any request got a 5xx. The gateway half serves the
hostile engine (tests.hostile.upstream) through a real gateway built with the
test helpers, so it runs from a checkout (tests/ importable), as the tests do.
With a PostgreSQL URL the control half runs in a fresh database created on that
server and dropped at the end, so runs never meet each other's rows.
"""

import argparse
import sys
import tempfile
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import httpx

from tests.hostile.control_cases import control_cases
from tests.hostile.control_run import Tally, fuzz, seed, send_case
from tests.hostile.harden_cases import (
    harden_cases,
    id_oracle_cases,
    raw_body_cases,
    run_cases,
    token_reuse_after_deletion,
)
from tests.hostile.upstream import (
    ENGINE_ANSWER_MODES,
    GARBAGE_STREAM,
    MODES,
    NAN_JSON,
    REDIRECT,
    HostileEngine,
)


def control_tally(database_url: str | None, per_operation: int, work: Path) -> Tally:
    from fastapi.testclient import TestClient

    from control.app import create_app
    from control.migrate import upgrade
    from control.settings import ControlSettings
    from specwire.artifacts import BUNDLED_PAIR_DIR

    url = database_url or f"sqlite:///{work / 'control.db'}"
    upgrade(url)
    settings = ControlSettings(
        data_dir=work,
        database_url=url,
        admin_token="hostile-admin",
        internal_token="hostile-internal",
        model_roots=[work, BUNDLED_PAIR_DIR],
        # The fuzz fails authentication on purpose from one address: without this the
        # failure limit would answer 429 for most of it and the routes go untested.
        auth_failure_burst=1_000_000,
    )
    app = create_app(settings)
    auth = {"Authorization": "Bearer hostile-admin"}
    tally = Tally()
    with TestClient(app, raise_server_exceptions=False) as client:
        ids = seed(client, auth)
        for case in control_cases(ids, work / "models"):
            response = send_case(client, case, auth)
            tally.add(response.status_code, case.name, expected=case.status)
        run_cases(client, harden_cases(ids, "hostile-internal"), auth, tally)
        token_reuse_after_deletion(client, auth, tally)
        id_oracle_cases(client, auth, ids, tally)
        tally_fuzz = fuzz(
            client,
            app.openapi(),
            ids,
            auth,
            {"Authorization": "Bearer hostile-internal"},
            per_operation=per_operation,
        )
    tally.statuses.update(tally_fuzz.statuses)
    tally.server_errors += tally_fuzz.server_errors
    return tally


def gate_tally(work: Path) -> Tally:
    """Bodies on raw sockets to a real control server, and the failure limit at its
    default settings (burst 20): 30 wrong tokens, the last 10 must be 429."""
    from urllib.parse import urlsplit

    from control.app import create_app
    from control.migrate import upgrade
    from control.settings import ControlSettings
    from tests.gateway.server import serve_app

    tally = Tally()
    url = f"sqlite:///{work / 'gate.db'}"
    upgrade(url)
    base = ControlSettings(
        data_dir=work, database_url=url, admin_token="gate-admin", internal_token="gate-int"
    )
    with serve_app(create_app(base.model_copy(update={"auth_failure_burst": 10**6}))) as root:
        raw_body_cases(urlsplit(root).port or 0, "gate-admin", tally)
    with serve_app(create_app(base)) as root, httpx.Client(base_url=root) as client:
        for i in range(30):
            response = client.get("/admin/v1/pools", headers={"Authorization": "Bearer wrong"})
            tally.add(
                response.status_code, f"wrong token #{i + 1}", expected=401 if i < 20 else 429
            )
    return tally


def gateway_tally(rounds: int) -> Tally:
    from tests.gateway.policy import TENANT_KEY, make_snapshot
    from tests.gateway.server import run_gateway, serve_app

    tally = Tally()
    auth = {"Authorization": f"Bearer {TENANT_KEY}"}
    engine = HostileEngine()
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve_app(engine) as url,
    ):
        bad = "http://engine-ü.example:8000"
        snapshot = make_snapshot(spec_urls=[url, bad], baseline_urls=[url])
        # NOTE: breakers that never open, so every request meets the engine's fault.
        with (
            run_gateway(Path(tmp), snapshot, breaker_failure_threshold=10**9) as gw,
            httpx.Client(timeout=30) as client,
        ):
            # The engine-answer modes once each: two of them are 48 MiB.
            plan = [m for _ in range(rounds) for m in MODES] + list(ENGINE_ANSWER_MODES)
            for mode in plan:
                for stream in (False, True):
                    body = {
                        "model": "tiny",
                        "messages": [{"role": "user", "content": mode}],
                        "max_tokens": 4,
                        "stream": stream,
                    }
                    r = client.post(f"{gw.base_url}/v1/chat/completions", json=body, headers=auth)
                    what = f"{mode} stream={stream}"
                    tally.statuses[r.status_code] += 1
                    # An engine's fault is a 502/503 or an error event by design;
                    # a 500 (the gateway's own defect) or a silent success is not.
                    if r.status_code == 500:
                        tally.server_errors.append(f"500 {what}")
                    if mode in (NAN_JSON, REDIRECT, GARBAGE_STREAM, *ENGINE_ANSWER_MODES) and (
                        r.status_code == 200 and "error" not in r.text
                    ):
                        tally.server_errors.append(f"empty success for {what}")
    return tally


def raw_header_tally(work: Path) -> Tally:
    """Non-ASCII and control-byte header values on raw sockets, to a real gateway and a
    real control plane under uvicorn. A 5xx or a dropped connection is a defect."""
    from tests.hostile.raw_headers import control_answers, gateway_answers

    tally = Tally()
    answers = control_answers(work) + gateway_answers(work / "raw-gw")
    for case, answer in answers:
        tally.statuses[answer.status] += 1
        if answer.status >= 500 or answer.status == 0:
            tally.server_errors.append(f"{answer.status} {case.what}")
    return tally


def _print(title: str, tally: Tally, seconds: float, *, bad: str) -> None:
    seen = ", ".join(f"{s}: {n}" for s, n in sorted(tally.statuses.items()))
    print(
        f"{title}: {tally.tried} requests in {seconds:.1f} s; statuses {seen}; "
        f"{bad}: {len(tally.server_errors)}; wrong 2xx: {len(tally.wrong_successes)}; "
        f"other than expected: {len(tally.unexpected)}"
    )
    for line in (tally.server_errors + tally.wrong_successes + tally.unexpected)[:20]:
        print("   ", line)


def _scratch(database_url: str | None) -> AbstractContextManager[str | None]:
    """A fresh database on a PostgreSQL server; any other URL (or none) as given."""
    if database_url is not None and database_url.startswith("postgresql"):
        from tests.fixtures.db import scratch_postgres_database

        return scratch_postgres_database(database_url)
    return nullcontext(database_url)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--per-operation", type=int, default=60)
    parser.add_argument("--gateway-rounds", type=int, default=25)
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as work:
        started = time.monotonic()
        with _scratch(args.database_url) as url:
            control = control_tally(url, args.per_operation, Path(work))
        backend = (args.database_url or "sqlite").split(":", 1)[0]
        _print(f"control plane ({backend})", control, time.monotonic() - started, bad="5xx")
        failed |= bool(control.server_errors or control.wrong_successes or control.unexpected)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        gate = gate_tally(Path(work))
    _print(
        "control bodies and auth limit (raw sockets)", gate, time.monotonic() - started, bad="5xx"
    )
    failed |= bool(gate.server_errors or gate.wrong_successes or gate.unexpected)
    started = time.monotonic()
    gateway = gateway_tally(args.gateway_rounds)
    _print(
        "gateway (hostile engine)",
        gateway,
        time.monotonic() - started,
        bad="500s or empty successes",
    )
    failed |= bool(gateway.server_errors)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        raw = raw_header_tally(Path(work))
    _print("raw-socket header values", raw, time.monotonic() - started, bad="5xx or no answer")
    failed |= bool(raw.server_errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
