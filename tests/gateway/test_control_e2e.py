"""The gateway on the real control plane: its snapshot (ETag/304), keys and flips.

Control runs for real (create_app on a migrated SQLite file, under uvicorn);
the tenant and its key are made through the admin API, as an admin would.
"""

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from control.cli.admin import app as admin_cli
from engine.pools.local import tiny_pair_dir
from specwire.replay import ROUTING_FIELDS
from tests.fixtures.services import require_redis
from tests.gateway.server import (
    GatewayServer,
    run_control_gateway,
    run_gateway,
    serve_app,
    serve_control,
)

ADMIN = "e2e-admin-token"
INTERNAL = "e2e-internal-token"


@contextmanager
def _control(tmp_path: Path, redis_url: str | None = None) -> Iterator[str]:
    with serve_control(tmp_path, ADMIN, INTERNAL, redis_url=redis_url) as control:
        yield control.url


@pytest.fixture
def control_url(tmp_path: Path) -> Iterator[str]:
    with _control(tmp_path) as url:
        yield url


def _admin(url: str, path: str, body: dict[str, object]) -> dict[str, object]:
    resp = httpx.post(
        url + "/admin/v1" + path, json=body, headers={"Authorization": f"Bearer {ADMIN}"}
    )
    assert resp.status_code == 201, resp.text
    doc: dict[str, object] = resp.json()
    return doc


def _new_tenant_key(url: str, name: str) -> str:
    tenant = _admin(url, "/tenants", {"name": name})
    key = _admin(url, f"/tenants/{tenant['id']}/keys", {"name": "k"})
    return str(key["key"])


def _version(gw: GatewayServer) -> int:
    snapshot = gw.state.store.snapshot
    assert snapshot is not None
    return snapshot.version


def _wait_for_key(gw: GatewayServer, key: str, timeout_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        resp = httpx.get(gw.base_url + "/v1/models", headers={"Authorization": f"Bearer {key}"})
        if resp.status_code == 200:
            return time.monotonic() - started
        assert resp.status_code in (401, 503), resp.text
        time.sleep(0.05)
    raise AssertionError("the gateway never accepted the new key")


def test_gateway_follows_control_snapshot(tmp_path: Path, control_url: str) -> None:
    first_key = _new_tenant_key(control_url, "acme")
    with run_gateway(
        tmp_path, None, control_url=control_url, internal_token=INTERNAL, snapshot_poll_s=0.2
    ) as gw:
        assert httpx.get(gw.base_url + "/readyz").status_code == 200
        _wait_for_key(gw, first_key, 5.0)
        version = _version(gw)
        polls = gw.app.state.poller.polls
        time.sleep(0.6)
        # Unchanged policy: polls keep coming back 304, the snapshot stays and is fresh.
        assert gw.app.state.poller.polls > polls
        assert _version(gw) == version
        assert gw.state.store.age_s() < 1.0
        second_key = _new_tenant_key(control_url, "globex")
        flip_s = _wait_for_key(gw, second_key, 5.0)
        assert _version(gw) > version
        # One poll interval plus a round trip.
        assert flip_s < 2.0


@pytest.mark.redis
def test_control_change_notification_beats_the_poll_interval(tmp_path: Path) -> None:
    redis_url = require_redis()
    with _control(tmp_path, redis_url) as url:
        _new_tenant_key(url, "acme")
        # A 30 s poll: only control's Redis notification can bring the change in time.
        with run_gateway(
            tmp_path,
            None,
            control_url=url,
            internal_token=INTERNAL,
            snapshot_poll_s=30.0,
            redis_url=redis_url,
        ) as gw:
            time.sleep(0.5)  # let the subscription settle
            flips = []
            for i in range(5):
                flips.append(_wait_for_key(gw, _new_tenant_key(url, f"t{i}"), 5.0))
            assert gw.app.state.poller.notifications >= 5
            print(f"control->gateway flip latencies (s): {sorted(round(f, 3) for f in flips)}")
            assert max(flips) < 2.0, flips


def _wait_refused(gw: GatewayServer, key: str, timeout_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        resp = httpx.get(gw.base_url + "/v1/models", headers={"Authorization": f"Bearer {key}"})
        if resp.status_code == 401:
            return time.monotonic() - started
        assert resp.status_code == 200, resp.text
        time.sleep(0.02)
    raise AssertionError("the gateway kept accepting a revoked key")


def test_a_revoked_key_is_refused_within_the_propagation_bound(
    tmp_path: Path, control_url: str
) -> None:
    """The gateway caches keys in its snapshot; a revocation reaches it with the next
    poll: refused within one poll interval plus a round trip (measured, default 1 s)."""
    poll_s = 1.0
    headers = {"Authorization": f"Bearer {ADMIN}"}
    with run_gateway(
        tmp_path,
        None,
        control_url=control_url,
        internal_token=INTERNAL,
        snapshot_poll_s=poll_s,
    ) as gw:
        latencies = []
        for i in range(4):
            tenant = _admin(control_url, "/tenants", {"name": f"revoked-{i}"})
            key = _admin(control_url, f"/tenants/{tenant['id']}/keys", {"name": "k"})
            _wait_for_key(gw, str(key["key"]), 5.0)  # the gateway now has it cached
            revoked = httpx.post(
                f"{control_url}/admin/v1/tenants/{tenant['id']}/keys/{key['id']}/revoke",
                headers=headers,
            )
            assert revoked.status_code == 200
            latencies.append(_wait_refused(gw, str(key["key"]), 5.0))
    print(f"revoked key refused after (s): {sorted(round(x, 3) for x in latencies)}")
    # One poll interval, plus the poll itself and the snapshot compile on a busy box.
    assert max(latencies) < 2 * poll_s, latencies


REFUSED_MARKER = "refused-marker-7f3a9c"


def _record(control_url: str, request_id: str, timeout_s: float = 10.0) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {ADMIN}"}
    deadline = time.monotonic() + timeout_s
    while True:
        resp = httpx.get(f"{control_url}/admin/v1/requests/{request_id}", headers=headers)
        if resp.status_code == 200:
            assert REFUSED_MARKER not in resp.text
            doc: dict[str, Any] = resp.json()
            return doc
        assert resp.status_code == 404, resp.text
        assert time.monotonic() < deadline, f"no record of {request_id}"
        time.sleep(0.1)


def test_requests_refused_before_routing_have_a_typed_record_without_text(
    tmp_path: Path, control_url: str
) -> None:
    key = _new_tenant_key(control_url, "acme")
    # A pool with no worker serves "tiny": a request for it is decided (it has an arm)
    # and then finds no worker (503), unlike the ones refused before routing.
    _admin(
        control_url,
        "/pools",
        {
            "name": "idle",
            "served_model_name": "tiny",
            "target_ref": str(tiny_pair_dir() / "target"),
        },
    )
    with run_control_gateway(tmp_path, control_url, INTERNAL) as gw:
        _wait_for_key(gw, key, 5.0)
        client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
        with pytest.raises(openai.InternalServerError):
            client.completions.create(
                model="tiny", prompt="x", max_tokens=4, extra_headers={"x-request-id": "decided"}
            )
        no_worker = _record(control_url, "decided")
        stranger = openai.OpenAI(
            base_url=gw.base_url + "/v1", api_key=f"sk-{REFUSED_MARKER}", max_retries=0
        )

        def rid(name: str) -> dict[str, str]:
            return {"x-request-id": f"refused-{name}"}

        with pytest.raises(openai.AuthenticationError):
            stranger.completions.create(
                model="tiny", prompt=REFUSED_MARKER, max_tokens=4, extra_headers=rid("key")
            )
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(
                model=f"m-{REFUSED_MARKER}",
                messages=[{"role": "user", "content": REFUSED_MARKER}],
                stream=True,
                extra_headers=rid("model"),
            )
        with pytest.raises(openai.BadRequestError):
            client.completions.create(
                model="tiny", prompt=REFUSED_MARKER, temperature=9.0, extra_headers=rid("invalid")
            )
        broken = httpx.post(
            gw.base_url + "/v1/completions",
            content=b'{"model": "tiny", "prompt": "' + REFUSED_MARKER.encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            | rid("json"),
        )
        assert broken.status_code == 400

        records = {name: _record(control_url, f"refused-{name}") for name in KINDS}
        gateway_metrics = httpx.get(gw.base_url + "/metrics").text

    for name, (status, code, tenant, endpoint, stream) in KINDS.items():
        r = records[name]
        # Every refusal here is the request's own fault (a 4xx): a client error.
        assert (r["http_status"], r["error_code"], r["outcome"]) == (status, code, "client_error")
        assert (r["arm"], r["reason"], r["model"]) == (None, "not_routed", None), r
        assert r["tenant"] == tenant and (r["tenant_id"] is None) == (tenant is None)
        assert (r["endpoint"], r["stream"]) == (endpoint, stream)
        assert r["segment"] is None and r["pool_id"] is None and r["e2e_ms"] >= 0
    # Routed requests only in the request metrics; the marker nowhere.
    counted = {
        s.labels["status"]: s.value
        for family in text_string_to_metric_families(gateway_metrics)
        for s in family.samples
        if s.name == "specroute_gateway_requests_total"
    }
    assert counted == {"503": 1.0}  # the decided request only
    assert REFUSED_MARKER not in gateway_metrics
    listed = httpx.get(
        f"{control_url}/admin/v1/requests",
        params={"tenant": "acme"},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert {r["request_id"] for r in listed.json()["items"]} == {
        "decided",
        "refused-model",
        "refused-invalid",
        "refused-json",
    }
    assert (no_worker["tenant"], no_worker["arm"], no_worker["model"]) == (
        "acme",
        "baseline",
        "tiny",
    )
    assert (no_worker["http_status"], no_worker["error_code"]) == (503, "no_healthy_worker")
    cli = CliRunner().invoke(
        admin_cli, ["--url", control_url, "--token", ADMIN, "request", "show", "refused-key"]
    )
    assert cli.exit_code == 0, cli.output
    assert "unknown (key refused)" in cli.output and "not routed" in cli.output
    assert "HTTP 401 (invalid_api_key)" in cli.output and REFUSED_MARKER not in cli.output
    show = ["--url", control_url, "--token", ADMIN, "request", "show", "refused-key"]
    replay = CliRunner().invoke(admin_cli, [*show, "--replay-settings"])
    assert replay.exit_code == 1
    assert replay.output.strip() == (
        "request 'refused-key' was refused before routing (not_routed, HTTP 401): "
        "no settings to replay"
    )


# request -> (HTTP status, error code, tenant, endpoint, stream)
KINDS: dict[str, tuple[int, str, str | None, str, bool]] = {
    "key": (401, "invalid_api_key", None, "completions", False),
    "model": (404, "model_not_found", "acme", "chat", True),
    "invalid": (400, "invalid_value", "acme", "completions", False),
    "json": (400, "invalid_json", "acme", "completions", False),
}


REPLAY_MARKER = "replay-marker-5d2e81"
# A bias value that appears nowhere else in a record (the privacy check looks for it).
BIAS = {"17": -73.125}


def test_a_routed_record_keeps_seed_digests_and_build_and_replays_without_text(
    tmp_path: Path, control_url: str
) -> None:
    """Real parts end to end: an engine agent heartbeats a fake engine (its /version)
    into control, the gateway routes a seeded, stop-, bias- and schema-carrying request
    to it and ships its record; the stored row and the API body hold the seed, the
    digests and the engine build, never the stop string, the bias or the schema."""
    from engine.agent import ControlClient, HeartbeatAgent, WorkerProbe
    from engine.agent.build import specroute_build
    from engine.fake import FAKE_ENGINE_VERSION, FakeUpstream
    from specwire.admin_client import AdminClient
    from specwire.digest import canonical_digest
    from tests.e2e.stack import wait_routable

    key = _new_tenant_key(control_url, "acme")
    pool = _admin(
        control_url,
        "/pools",
        {
            "name": "fake",
            "served_model_name": "tiny",
            "target_ref": str(tiny_pair_dir() / "target"),
        },
    )
    admin = AdminClient(control_url, ADMIN)
    token = admin.pools.enrol(
        int(str(pool["id"])), {"name": "fake-agent", "allowed_endpoints": ["http://127.0.0.1"]}
    )["token"]
    schema = {"type": "object", "properties": {REPLAY_MARKER: {"type": "string"}}}
    response_format = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    stop = [REPLAY_MARKER, "\n\n"]
    agent_client = ControlClient(control_url, token)
    fake = FakeUpstream(tokens=3, interval_s=0.001, model="tiny")
    with serve_app(fake) as engine_url:
        build = specroute_build(vllm_fix=True)
        probe = WorkerProbe(
            pool_id=int(str(pool["id"])), endpoint_url=engine_url, speculative=False, build=build
        )
        beat, _ = HeartbeatAgent("fake-w0", probe, agent_client).beat_once()
        assert beat.healthy and beat.engine_build == f"vllm {FAKE_ENGINE_VERSION}; {build}"
        with run_control_gateway(tmp_path, control_url, INTERNAL) as gw:
            _wait_for_key(gw, key, 5.0)
            wait_routable(gw, pools=1)
            resp = httpx.post(
                gw.base_url + "/v1/chat/completions",
                json={
                    "model": "tiny",
                    "messages": [{"role": "user", "content": REPLAY_MARKER}],
                    "max_tokens": 3,
                    "temperature": 0.8,
                    "top_p": 0.95,
                    "seed": 4242,
                    "stop": stop,
                    "logit_bias": BIAS,
                    "response_format": response_format,
                },
                headers={"Authorization": f"Bearer {key}", "x-request-id": "replay-me"},
            )
            assert resp.status_code == 200, resp.text
            record = _record(control_url, "replay-me")
    agent_client.close()
    admin.close()
    engine = create_engine(f"sqlite:///{tmp_path / 'control.db'}")
    with engine.connect() as conn:
        row = conn.execute(
            text("SELECT * FROM request_records WHERE request_id = 'replay-me'")
        ).one()
    engine.dispose()

    expected_build = f"vllm {FAKE_ENGINE_VERSION}; {build}"
    digests = {
        "stop_digest": canonical_digest(stop),
        "logit_bias_digest": canonical_digest(BIAS),
        "schema_digest": canonical_digest({"response_format": response_format}),
    }
    stored = json.loads(row.sampling)
    assert row.engine_build == expected_build and record["engine_build"] == expected_build
    for sampling in (stored, record["sampling"]):
        assert (sampling["seed"], sampling["seed_present"]) == (4242, True)
        assert {name: sampling[name] for name in digests} == digests
        assert (sampling["stop_count"], sampling["logit_bias_count"]) == (2, 1)
    assert (record["arm"], record["pool_id"], record["worker_id"]) == (
        "baseline",
        pool["id"],
        "fake-w0",
    )
    # Privacy: neither the stop string, the schema nor the bias value is stored or served.
    row_text = " ".join(str(value) for value in row)
    for leaked in (REPLAY_MARKER, "73.125"):
        assert leaked not in row_text and leaked not in json.dumps(record)

    cli = CliRunner()
    base = ["--url", control_url, "--token", ADMIN, "request", "show"]
    replay = cli.invoke(admin_cli, [*base, "replay-me", "--replay-settings"])
    assert replay.exit_code == 0, replay.output
    lines = dict(line.split(None, 1) for line in replay.output.splitlines())
    assert lines["model"] == "tiny" and lines["arm"] == "baseline"
    assert lines["engine_build"] == expected_build and lines["pool_id"] == str(pool["id"])
    assert (lines["seed"], lines["temperature"], lines["top_p"]) == ("4242", "0.8", "0.95")
    assert (lines["max_tokens"], lines["top_k"]) == ("3", "-")
    assert {name: lines[name] for name in digests} == digests
    assert REPLAY_MARKER not in replay.output and "73.125" not in replay.output
    as_json = cli.invoke(admin_cli, [*base, "replay-me", "--replay-settings", "-o", "json"])
    assert as_json.exit_code == 0, as_json.output
    settings = json.loads(as_json.output)
    assert settings["sampling"]["seed"] == 4242 and settings["engine_build"] == expected_build
    assert set(settings) == {*ROUTING_FIELDS, "sampling"}

    unknown = cli.invoke(admin_cli, [*base, "no-such-request", "--replay-settings"])
    assert unknown.exit_code == 1
    assert unknown.output.strip().splitlines() == [
        "error 404 request_not_found: no record of request 'no-such-request' (not sampled, "
        "not yet flushed, or past retention)"
    ]
