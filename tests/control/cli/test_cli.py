"""`specroute control migrate` and `specroute admin ...` against a real server over HTTP."""

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
from typer.testing import CliRunner

from control.cli import app as root
from tests.control.cli.conftest import TOKEN
from tests.control.conftest import THRESHOLDS, eval_cases, write_model_dir
from tests.control.requests.records import batch, record


def test_admin_cli_registers_a_pair_and_drives_a_rollout(server: str, tmp_path: Path) -> None:
    runner = CliRunner(
        env={"SPECROUTE_ADMIN_URL": server, "SPECROUTE_ADMIN_TOKEN": TOKEN, "COLUMNS": "200"}
    )
    target = write_model_dir(tmp_path / "target")
    draft = write_model_dir(tmp_path / "draft")

    def ok(*args: str) -> str:
        result = runner.invoke(root, ["admin", *args])
        assert result.exit_code == 0, result.output
        return result.output

    registered = json.loads(
        ok(
            "pair",
            "register",
            "tiny",
            "--target",
            str(target),
            "--draft",
            str(draft),
            "--k",
            "4",
            "-o",
            "json",
        )
    )
    assert (registered["version"], registered["num_speculative_tokens"]) == (1, 4)
    version_id = str(registered["id"])
    spec = json.loads(
        ok(
            "pool",
            "create",
            "spec",
            "--model",
            "tiny",
            "--target",
            str(target),
            "--pair-version",
            version_id,
            "-o",
            "json",
        )
    )
    base = json.loads(
        ok("pool", "create", "base", "--model", "tiny", "--target", str(target), "-o", "json")
    )
    # An engine agent's token, enrolled for the base pool and loopback: it heartbeats
    # there and nowhere else.
    agent_token = ok("pool", "enrol", "base", "--allow", "http://127.0.0.1").strip()
    assert agent_token.startswith("sr-agent-") and "\n" not in agent_token
    agent = {"Authorization": f"Bearer {agent_token}"}
    beat = {
        "endpoint_url": "http://127.0.0.1:8201",
        "healthy": True,
        "sent_at": "2026-01-01T00:00:00Z",
    }
    own = httpx.post(
        f"{server}/internal/v1/workers/base-0/heartbeat",
        json=beat | {"pool_id": base["id"]},
        headers=agent,
    )
    assert own.status_code == 200, own.text
    other = httpx.post(
        f"{server}/internal/v1/workers/spec-0/heartbeat",
        json=beat | {"pool_id": spec["id"]},
        headers=agent,
    )
    assert other.status_code == 403
    segment = json.loads(
        ok(
            "segment",
            "create",
            "code",
            "--selector",
            '{"tasks": ["code"]}',
            "--eval-set",
            "code-evals",
            "-o",
            "json",
        )
    )
    assert segment["eval_set"] == "code-evals"
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(eval_cases(3, stale=1)))
    made = ok(
        "eval-set", "create", "code-evals", "--cases", str(cases), "--prompt-store", "file:///p"
    )
    assert made.strip() == "eval set code-evals v1 (id 1): 3 cases, 1 stale"
    listed = ok("eval-sets")
    assert "code-evals" in listed and "case-0" in listed and "case-1" not in listed
    thresholds = json.loads(
        ok("thresholds", "create", "default", "--values", json.dumps(THRESHOLDS), "-o", "json")
    )
    rollout = json.loads(
        ok(
            "rollout",
            "create",
            "code-tiny",
            "--segment",
            str(segment["id"]),
            "--pair-version",
            version_id,
            "--spec-pool",
            str(spec["id"]),
            "--baseline-pool",
            str(base["id"]),
            "--thresholds",
            str(thresholds["id"]),
            "--stages",
            "1,10,100",
            "-o",
            "json",
        )
    )
    rid = str(rollout["id"])
    missing = runner.invoke(root, ["admin", "rollout", "start", rid])
    assert missing.exit_code == 1
    assert (
        "error 409" in missing.output and "no offline evaluation of pair version" in missing.output
    )
    waive = ["--waive", "offline_evaluation", "--reason", "evaluated before the lifecycle"]
    assert ok("rollout", "start", rid, *waive).strip() == (
        "rollout code-tiny: shadow at 10 % (version 2)"
    )
    assert ok("rollout", "start", rid, "--waive", "shadow", "--reason", "urgent").strip() == (
        "rollout code-tiny: canary at 1 % (version 3)"
    )
    assert ok("rollout", "promote", rid, "--reason", "good").strip() == (
        "rollout code-tiny: ramping at 10 % (version 4)"
    )

    illegal = runner.invoke(root, ["admin", "rollout", "enable", rid])
    assert illegal.exit_code == 1
    assert "error 409" in illegal.output
    assert "allowed: promote, pause, rollback, disable" in illegal.output
    stale = runner.invoke(root, ["admin", "rollout", "pause", rid, "--if-match", "1"])
    assert stale.exit_code == 1
    assert "error 412" in stale.output

    status = ok("status")
    assert "code-tiny" in status
    assert "ramping" in status
    assert "baseline" in status
    decisions = ok("decisions", "--rollout", rid)
    assert "manual_promote" in decisions and "manual_start" in decisions
    audit = ok("audit", "--entity-type", "rollout")
    assert "rollout.promote" in audit and "good" in audit
    assert "pair.create" not in audit

    # Scripts read listings as JSON: the API's own documents.
    as_json = json.loads(ok("status", "--output", "json"))
    [listed] = [r for r in as_json["rollouts"] if r["id"] == rollout["id"]]
    assert (listed["state"], listed["percentage"]) == ("ramping", 10)
    assert {p["name"] for p in as_json["pools"]} == {"spec", "base"}
    kinds = [d["kind"] for d in json.loads(ok("decisions", "--rollout", rid, "-o", "json"))]
    assert kinds == ["manual_promote", "manual_start", "manual_start"]
    actions = [
        e["action"] for e in json.loads(ok("audit", "--entity-type", "rollout", "-o", "json"))
    ]
    assert "rollout.promote" in actions
    [pair] = json.loads(ok("pair", "list", "--output", "json"))
    assert pair["name"] == "tiny" and pair["versions"][0]["num_speculative_tokens"] == 4
    bad = runner.invoke(root, ["admin", "status", "--output", "xml"])
    assert bad.exit_code == 2

    # On a narrow terminal (or a pipe) tables fold long values instead of cutting them.
    narrow = CliRunner(
        env={"SPECROUTE_ADMIN_URL": server, "SPECROUTE_ADMIN_TOKEN": TOKEN, "COLUMNS": "50"}
    )
    for args in (["status"], ["decisions"], ["audit"], ["pair", "list"]):
        folded = narrow.invoke(root, ["admin", *args])
        assert folded.exit_code == 0, folded.output
        assert "…" not in folded.output, folded.output
        assert max(len(line) for line in folded.output.splitlines()) <= 50
    rollouts = narrow.invoke(root, ["admin", "status"]).output.split("Pools")[0]
    last_column = "".join(
        line.split("│")[-2].strip() for line in rollouts.splitlines() if line.count("│") > 2
    )
    assert last_column == "promote,pause,rollback,disable"


def test_admin_cli_reports_auth_and_connection_errors(server: str) -> None:
    bad = CliRunner(env={"SPECROUTE_ADMIN_URL": server, "SPECROUTE_ADMIN_TOKEN": "wrong"})
    result = bad.invoke(root, ["admin", "status"])
    assert result.exit_code == 1
    assert "error 401" in result.output
    down = CliRunner(
        env={"SPECROUTE_ADMIN_URL": "http://127.0.0.1:1", "SPECROUTE_ADMIN_TOKEN": "x"}
    )
    result = down.invoke(root, ["admin", "status"])
    assert result.exit_code == 1
    assert "unreachable" in result.output
    # No token at all: a clear message, not a silent well-known default.
    unset = CliRunner(
        env={"SPECROUTE_ADMIN_URL": server, "SPECROUTE_ADMIN_TOKEN": None, "COLUMNS": "300"}
    )
    result = unset.invoke(root, ["admin", "status"])
    assert result.exit_code == 1
    assert "no admin token: export SPECROUTE_ADMIN_TOKEN" in result.output


def test_admin_cli_tells_one_requests_story_and_lists_them(server: str) -> None:
    start = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    stored = record(
        "req-cli-1",
        received_at=start.isoformat(),
        tenant_id=1,
        stream=True,
        adapter="tiny-sql",
        segment_id=2,
        rollout_id=5,
        rollout_version=3,
        pair="tiny-v1",
        worker_id="w-1",
        sampling={"temperature": 0.7, "seed_present": True, "stop_count": 1},
        outcome="error",
        http_status=502,
        error_code="stream_broken",
    )
    posted = httpx.post(
        server + "/internal/v1/telemetry",
        json=batch([stored], start=start, gateway="gw-cli"),
        headers={"Authorization": "Bearer cli-internal"},
    )
    assert posted.status_code == 200 and posted.json()["requests_stored"] == 1, posted.text
    runner = CliRunner(
        env={"SPECROUTE_ADMIN_URL": server, "SPECROUTE_ADMIN_TOKEN": TOKEN, "COLUMNS": "200"}
    )
    story = runner.invoke(root, ["admin", "request", "show", "req-cli-1"])
    assert story.exit_code == 0, story.output
    for line in (
        "tenant     acme (1)",
        "asked      chat stream, model tiny, adapter tiny-sql",
        "segment    code (2)",
        "rollout    5 (version 3)",
        "decision   arm=spec reason=cohort_spec, pair tiny-v1 (version id 7)",
        "accepted   18/30 drafted tokens in 10 drafts, per position [8, 6, 4]",
        "latency    TTFT 40.0 ms, TPOT 6.5 ms, end-to-end 228.5 ms",
        "outcome    error HTTP 502 (stream_broken)",
    ):
        assert line in story.output, (line, story.output)
    assert "seed_present=True" in story.output and "stop_count=1" in story.output
    as_json = runner.invoke(root, ["admin", "request", "show", "req-cli-1", "-o", "json"])
    assert json.loads(as_json.output)["gateway_id"] == "gw-cli"
    listed = runner.invoke(root, ["admin", "requests", "--tenant", "acme", "--outcome", "error"])
    assert listed.exit_code == 0 and "req-cli-1" in listed.output
    none = runner.invoke(root, ["admin", "requests", "--tenant", "globex"])
    assert none.exit_code == 0 and "req-cli-1" not in none.output
    missing = runner.invoke(root, ["admin", "request", "show", "req-nope"])
    assert missing.exit_code == 1 and "request_not_found" in missing.output
    # Acceptance per adapter over the records: 18 of 30 drafted tokens in 10 drafts.
    window = ["--since", "2026-12-01T02:00:00Z", "--until", "2026-12-01T04:00:00Z"]
    per_adapter = runner.invoke(root, ["admin", "adapters", *window])
    assert per_adapter.exit_code == 0, per_adapter.output
    row = next(line for line in per_adapter.output.splitlines() if "tiny-sql" in line)
    for cell in ("tiny-v1", "0.60", "2.80", "0.80 / 0.60 / 0.40"):
        assert cell in row, (cell, per_adapter.output)
    as_json = runner.invoke(root, ["admin", "adapters", *window, "--output", "json"])
    assert json.loads(as_json.output)["items"][0]["mean_acceptance_length"] == 2.8
