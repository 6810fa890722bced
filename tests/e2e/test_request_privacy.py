"""Per-request records end to end, and privacy: a unique marker sent in prompts, stop
strings and user ids through every path (the shadow's mirror included) appears in no
table, log line, metric or record.

Real parts: control (uvicorn, SQLite file) provisioned through the admin API, the
engine agent's heartbeats for the two session vLLM servers, a gateway polling
control and flushing telemetry, and the real `openai` client.
"""

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from sqlalchemy import create_engine, inspect, text
from typer.testing import CliRunner

from control.cli.admin import app as admin_cli
from demo.plan import DEMO_THRESHOLDS, SegmentPlan, provision
from specwire.admin_client import AdminClient
from tests.e2e.stack import engine_agents, wait_routable
from tests.fixtures.vllm import RunningServer, require_tiny_pair
from tests.gateway.server import GatewayServer, run_control_gateway, serve_control

pytestmark = pytest.mark.vllm

ADMIN = "privacy-admin-token"
INTERNAL = "privacy-internal-token"
MARKER = f"PRIVATE-{uuid.uuid4().hex}"
SEGMENT = SegmentPlan("code-completion", "code", "acme", 0.0, ("x",), 8, 1.0, 1, 1)
# In shadow: every request is served by the baseline and mirrored to the spec pool.
SHADOW_SEGMENT = SegmentPlan("prose-shadow", "prose", "acme", 0.7, ("x",), 8, 1.0, 1, 1)
# Loggers that do not propagate to the root (uvicorn's own configuration).
_NON_PROPAGATING = ("uvicorn", "uvicorn.error", "uvicorn.access")


class _Capture(logging.Handler):
    """Every log record of every logger, as its message with the arguments applied."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = record.getMessage()
        except Exception:  # a malformed record must still be searched
            line = f"{record.msg!r} {record.args!r}"
        if record.exc_info:
            line += logging.Formatter().formatException(record.exc_info)
        self.lines.append(line)


@contextmanager
def _capture_all_logs() -> Iterator[_Capture]:
    capture = _Capture()
    root = logging.getLogger()
    loggers = [root, *(logging.getLogger(n) for n in _NON_PROPAGATING)]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(capture)
        lg.setLevel(logging.DEBUG)
    try:
        yield capture
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(capture)
            lg.setLevel(level)


REFUSED = {"privacy-no-model", "privacy-invalid"}


def _mirror_outcomes(gw: GatewayServer, timeout_s: float = 20.0) -> dict[str, float]:
    """The gateway's shadow mirrors by outcome, once the one sent has finished."""
    deadline = time.monotonic() + timeout_s
    while True:
        outcomes = {
            outcome: value
            for outcome in ("ok", "error", "cancelled", "skipped", "no_worker")
            if (
                value := gw.state.metrics.registry.get_sample_value(
                    "specroute_gateway_shadow_mirrors_total", {"outcome": outcome}
                )
            )
        }
        if outcomes or time.monotonic() > deadline:
            return outcomes
        time.sleep(0.1)


def _records(control_url: str, n: int, timeout_s: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    items: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        resp = httpx.get(
            control_url + "/admin/v1/requests",
            params={"tenant": "acme", "limit": 100},
            headers={"Authorization": f"Bearer {ADMIN}"},
        )
        assert resp.status_code == 200, resp.text
        items = resp.json()["items"]
        if len(items) >= n:
            return items
        time.sleep(0.2)
    ids = sorted(r["request_id"] for r in items)
    raise AssertionError(f"{len(items)} of {n} request records reached control: {ids}")


def _table_text(db_url: str) -> str:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            parts = []
            for table in inspect(conn).get_table_names():
                rows = conn.execute(text(f'SELECT * FROM "{table}"')).all()
                parts.append(f"{table}: {len(rows)} rows\n" + "\n".join(map(repr, rows)))
            return "\n".join(parts)
    finally:
        engine.dispose()


def _arm_requests(db_url: str, rollout_id: int) -> dict[str, int]:
    """Requests per arm in the rollout's stored telemetry windows."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT arm, SUM(requests) FROM telemetry_windows WHERE rollout_id = :r "
                    "GROUP BY arm"
                ),
                {"r": rollout_id},
            ).all()
            return {str(arm): int(n) for arm, n in rows}
    finally:
        engine.dispose()


def _send_every_path(gw: GatewayServer, key: str) -> dict[str, tuple[str, str]]:
    """One request per path, each carrying the marker; request id -> (arm, reason)."""
    client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
    task = {"x-specroute-task": "code"}
    chat: list[ChatCompletionMessageParam] = [{"role": "user", "content": f"def {MARKER}(a, b):"}]
    expected: dict[str, tuple[str, str]] = {}

    def rid(name: str) -> dict[str, str]:
        return task | {"x-request-id": f"privacy-{name}"}

    client.chat.completions.create(
        model="tiny",
        messages=chat,
        max_tokens=8,
        temperature=0.0,
        seed=7,
        user=MARKER,
        extra_headers=rid("chat-spec") | {"x-specroute-speculation": "on"},
    )
    expected["privacy-chat-spec"] = ("spec", "override_header")
    with client.chat.completions.create(
        model="tiny",
        messages=chat,
        max_tokens=8,
        temperature=0.7,
        stop=[MARKER, "\n\n"],
        stream=True,
        extra_headers=rid("chat-stream-baseline") | {"x-specroute-speculation": "off"},
    ) as stream:
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) is not None
    expected["privacy-chat-stream-baseline"] = ("baseline", "override_header")
    client.completions.create(
        model="tiny",
        prompt=f"# {MARKER}\n",
        max_tokens=8,
        temperature=0.0,
        user=MARKER,
        extra_headers=rid("completion-cohort"),
    )
    expected["privacy-completion-cohort"] = ("", "")  # the cohort decides
    with client.completions.create(
        model="tiny",
        prompt=f"# {MARKER}\n",
        max_tokens=8,
        temperature=0.0,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=rid("completion-stream-spec") | {"x-specroute-speculation": "on"},
    ) as completion_stream:
        assert [c for c in completion_stream if c.usage is not None]
    expected["privacy-completion-stream-spec"] = ("spec", "override_header")
    client.completions.create(
        model="tiny",
        prompt=f"# {MARKER}\n",
        max_tokens=8,
        extra_body={"min_p": 0.1},
        extra_headers=rid("incompatible") | {"x-specroute-speculation": "on"},
    )
    expected["privacy-incompatible"] = ("baseline", "incompatible_parameter")
    # An engine refusal after routing: more tokens than the context holds.
    with pytest.raises(openai.BadRequestError):
        client.completions.create(
            model="tiny",
            prompt=f"# {MARKER}\n",
            max_tokens=100_000,
            extra_headers=rid("engine-refusal") | {"x-specroute-speculation": "off"},
        )
    expected["privacy-engine-refusal"] = ("baseline", "override_header")
    client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": f"Tell me about {MARKER}."}],
        max_tokens=8,
        temperature=0.7,
        extra_headers={"x-specroute-task": "prose", "x-request-id": "privacy-shadow"},
    )
    # Its mirror to the spec pool (a copy nobody asked for) feeds the rollout's telemetry
    # windows, not the request records: the caller's record is the request's story.
    expected["privacy-shadow"] = ("baseline", "shadow")
    # Refused before routing (a record with no arm, model or text): an unknown model,
    # an invalid value.
    with pytest.raises(openai.NotFoundError):
        client.completions.create(
            model=f"m-{MARKER}", prompt=MARKER, max_tokens=4, extra_headers=rid("no-model")
        )
    with pytest.raises(openai.BadRequestError):
        client.completions.create(
            model="tiny", prompt=MARKER, temperature=9.0, extra_headers=rid("invalid")
        )
    return expected


def test_every_routed_request_has_a_record_and_the_marker_is_nowhere(
    tmp_path: Path, vllm_spec_server: RunningServer, vllm_baseline_server: RunningServer
) -> None:
    servers = {"spec": vllm_spec_server, "baseline": vllm_baseline_server}
    engine_log_sizes = {n: s.log_path.stat().st_size for n, s in servers.items()}
    with (
        _capture_all_logs() as logs,
        serve_control(tmp_path, ADMIN, INTERNAL) as control,
    ):
        control_url, db_url = control.url, control.db_url
        admin = AdminClient(control_url, ADMIN)
        provisioned = provision(
            admin,
            target_dir=str(require_tiny_pair() / "target"),
            draft_dir=str(require_tiny_pair() / "draft"),
            segments=(SEGMENT, SHADOW_SEGMENT),
            thresholds=DEMO_THRESHOLDS | {"shadow_percentage": 100.0},
        )
        admin.tenants.update("acme", {"override_allowed": True})
        pools = {p["name"]: p["id"] for p in admin.pools.list()}
        pool_ids = {
            "spec": pools[provisioned.spec_pool],
            "baseline": pools[provisioned.baseline_pool],
        }
        with engine_agents(admin, control_url, pool_ids, servers, prefix="privacy"):
            for segment, waive in (
                (SEGMENT, ["offline_evaluation", "shadow"]),  # -> canary
                (SHADOW_SEGMENT, ["offline_evaluation"]),  # -> shadow
            ):
                admin.call(
                    "POST",
                    f"/rollouts/{provisioned.rollout_ids[segment.name]}/start",
                    json={"reason": "privacy test", "waive": waive},
                )
            with run_control_gateway(tmp_path / "gw", control_url, INTERNAL) as gw:
                wait_routable(gw)
                expected = _send_every_path(gw, provisioned.tenant_keys["acme"])
                assert _mirror_outcomes(gw) == {"ok": 1.0}
                records = _records(control_url, len(expected) + len(REFUSED))
                gateway_metrics = httpx.get(gw.base_url + "/metrics").text
            control_metrics = httpx.get(control_url + "/metrics").text
            cli = CliRunner().invoke(
                admin_cli,
                ["--url", control_url, "--token", ADMIN, "request", "show", "privacy-chat-spec"],
            )
        admin.close()
        tables = _table_text(db_url)
        shadow_windows = _arm_requests(db_url, provisioned.rollout_ids[SHADOW_SEGMENT.name])

    # Every routed request has its record, with the decision the client saw.
    by_id = {r["request_id"]: r for r in records}
    assert set(by_id) == set(expected) | REFUSED
    for request_id in REFUSED:
        rec = by_id.pop(request_id)
        assert (rec["arm"], rec["reason"], rec["model"], rec["outcome"]) == (
            None,
            "not_routed",
            None,
            "client_error",  # refused for its own fault (4xx), never an arm's error
        )
    for request_id, (arm, reason) in expected.items():
        rec = by_id[request_id]
        segment = SHADOW_SEGMENT if "shadow" in request_id else SEGMENT
        assert rec["tenant"] == "acme" and rec["segment"] == segment.name
        assert rec["rollout_id"] == provisioned.rollout_ids[segment.name]
        assert rec["rollout_version"] is not None
        if arm:
            assert (rec["arm"], rec["reason"]) == (arm, reason), rec
    spec = by_id["privacy-chat-spec"]
    assert spec["pair"] == "tiny-v1" and spec["pool_id"] == pool_ids["spec"]
    assert spec["worker_id"] == "privacy-spec" and spec["engine_version"]
    assert spec["endpoint"] == "chat" and spec["stream"] is False
    assert 1 <= spec["completion_tokens"] <= 8 and spec["prompt_tokens"] > 0
    assert spec["drafts"] > 0 and len(spec["accepted_per_position"]) == 3
    assert spec["ttft_ms"] is None and spec["e2e_ms"] > 0  # non-streaming: no first token
    assert spec["sampling"]["temperature"] == 0.0 and spec["sampling"]["seed_present"] is True
    streamed = by_id["privacy-chat-stream-baseline"]
    assert streamed["stream"] is True and streamed["ttft_ms"] > 0 and streamed["drafts"] == 0
    assert streamed["sampling"]["stop_count"] == 2
    assert by_id["privacy-incompatible"]["sampling"]["min_p"] == 0.1
    refused = by_id["privacy-engine-refusal"]
    assert (refused["outcome"], refused["http_status"]) == ("client_error", 400)
    assert refused["error_code"] == "upstream_rejected"
    assert cli.exit_code == 0, cli.output
    assert "privacy-chat-spec" in cli.output and "arm=spec reason=override_header" in cli.output

    # The shadow: the caller served by the baseline, its mirror counted for the spec arm.
    assert shadow_windows == {"baseline": 1, "spec": 1}, shadow_windows

    # And the marker is nowhere: not in a table, a log line, a metric or a record.
    assert MARKER not in tables
    assert "request_records" in tables and "privacy-chat-spec" in tables
    leaked = [line for line in logs.lines if MARKER in line]
    assert leaked == [], leaked[:3]
    assert len(logs.lines) > 0
    assert MARKER not in gateway_metrics and MARKER not in control_metrics
    assert MARKER not in str(records) and MARKER not in cli.output
    for name, srv in servers.items():
        with srv.log_path.open("rb") as f:
            f.seek(engine_log_sizes[name])
            assert MARKER.encode() not in f.read(), f"the {name} engine logged the marker"
