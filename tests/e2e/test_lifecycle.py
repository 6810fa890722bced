"""The draft lifecycle end to end on real parts: draft → offline → shadow → canary.

Control (uvicorn, SQLite file) is provisioned through the admin API; the engine
agents beat for the two session vLLM servers; `specroute engine evaluate` runs
the pair over a governed eval set on the real spec server; a real Celery worker
runs the automation's jobs; a gateway polls control and flushes telemetry; the
callers use the real `openai` client.

1. `start` from draft is refused (409 missing_evidence) without an offline
   evaluation; `evaluate` puts the rollout in offline, where the job waits.
2. `engine evaluate` posts an evaluation that meets the offline criteria; the
   `advance_offlines` job moves the rollout into shadow (decision + record).
3. In shadow every caller is served by the baseline arm (reason=shadow) while a
   copy of each request runs on the spec pool; both land in control as the
   rollout's telemetry, with the callers' token counts on the baseline arm.
4. `evaluate_shadows` starts the canary on the shadow's exit criterion, with a
   record; canary traffic is split between the arms by cohort.

The threshold set is tight (few samples, a generous latency margin: the two
engines share a busy 2-core machine) so the whole walk takes about a minute.
"""

import json
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from celery import Celery
from sqlalchemy import select
from typer.testing import CliRunner

from control.automation.tasks import task_name
from control.db import Database
from control.models import TelemetryWindowRow
from engine.cli import app as engine_app
from engine.pools.probe_prompts import CODE_PROMPTS
from gateway.decision.cohort import in_spec_cohort
from specwire.admin_client import AdminClient
from specwire.prompts import prompt_digest
from tests.e2e.stack import automation_worker, engine_agents, wait_routable
from tests.fixtures.vllm import RunningServer, require_tiny_pair
from tests.gateway.server import ControlPlane, GatewayServer, run_control_gateway, serve_control

pytestmark = pytest.mark.vllm

ADMIN = "lifecycle-admin-token"
INTERNAL = "lifecycle-internal-token"
MAX_TOKENS = 24
STAGES = [50.0, 100.0]
THRESHOLDS: dict[str, Any] = {
    "min_acceptance_rate": 0.1,
    "acceptance_indifference": 0.1,
    "min_mean_acceptance_length": 1.2,
    "min_speedup": 1.0,
    "max_kv_cache_usage": 0.95,
    "min_samples": 8,
    "min_block_requests": 4,
    "stage_dwell_seconds": 0,
    "guard_dwell_seconds": 0,
    "probation_percentage": 10.0,
    "cooldown_seconds": 3600,
    "max_inconclusive_rounds": 20,
    "false_alarm_rate": 0.2,
    "latency_margin": 3.0,
    "ttft_margin": 10.0,
    "offline_min_cases": len(CODE_PROMPTS),
    "offline_min_mean_acceptance_length": 1.2,
    "offline_min_expected_speedup": 1.05,
    # Every request mirrored: the canary's first stage (50 %) loads the spec pool less.
    "shadow_percentage": 100.0,
}
TASK_TIMEOUT_S = 60.0


def _register(admin: AdminClient, store: Path) -> dict[str, Any]:
    pair_dir = require_tiny_pair()
    pair = admin.call("POST", "/pairs", json={"name": "tiny"})
    version = admin.call(
        "POST",
        f"/pairs/{pair['id']}/versions",
        json={
            "method": "draft_model",
            "target_ref": str(pair_dir / "target"),
            "draft_ref": str(pair_dir / "draft"),
            "num_speculative_tokens": 3,
            "draft_sample_method": "probabilistic",
        },
    )
    pools = {
        name: admin.call(
            "POST",
            "/pools",
            json={
                "name": f"tiny-{name}",
                "served_model_name": "tiny",
                "target_ref": str(pair_dir / "target"),
                "desired_workers": 1,
                **({"pair_version_id": version["id"]} if name == "spec" else {}),
            },
        )["id"]
        for name in ("spec", "baseline")
    }
    cases = []
    with store.open("w") as f:
        for i, prompt in enumerate(CODE_PROMPTS):
            messages = [{"role": "user", "content": prompt}]
            f.write(json.dumps({"ref": f"p{i}", "messages": messages}) + "\n")
            cases.append(
                {
                    "case_key": f"code-{i}",
                    "labels": {"task": "code", "temperature": "0"},
                    "why": "the segment's typical prompts",
                    "source": "curated",
                    "reviewer": "alice",
                    "supports": "code-completion policy",
                    "refresh_by": "2999-01-01",
                    "prompt_ref": f"p{i}",
                    "prompt_sha256": prompt_digest(messages),
                }
            )
    eval_set = admin.call(
        "POST",
        "/eval-sets",
        json={"name": "code-evals", "prompt_store": f"file://{store}", "cases": cases},
    )
    thresholds = admin.call("POST", "/threshold-sets", json={"name": "e2e", **THRESHOLDS})
    segment = admin.call(
        "POST",
        "/segments",
        json={
            "name": "code-completion",
            "selector": {"tasks": ["code"]},
            "priority": 0,
            "eval_set": "code-evals",
        },
    )
    tenant = admin.call("POST", "/tenants", json={"name": "acme"})
    key = admin.call("POST", f"/tenants/{tenant['id']}/keys", json={"name": "e2e"})["key"]
    rollout = admin.call(
        "POST",
        "/rollouts",
        json={
            "name": "code-tiny",
            "segment_id": segment["id"],
            "pair_version_id": version["id"],
            "spec_pool_id": pools["spec"],
            "baseline_pool_id": pools["baseline"],
            "threshold_set_id": thresholds["id"],
            "stages": STAGES,
        },
    )
    return {
        "version_id": version["id"],
        "pools": pools,
        "eval_set_id": eval_set["id"],
        "rollout_id": rollout["id"],
        "key": key,
    }


def _run_task(app: Celery, name: str, *args: Any) -> Any:
    return app.send_task(task_name(name), args=list(args)).get(
        timeout=TASK_TIMEOUT_S, interval=0.05
    )


def _outcome(results: list[dict[str, Any]], rollout_id: int) -> dict[str, Any]:
    [mine] = [r for r in results if r["rollout_id"] == rollout_id]
    return mine


def _decisions(admin: AdminClient, rollout_id: int) -> list[dict[str, Any]]:
    page = admin.call("GET", "/decisions", params={"rollout_id": rollout_id, "limit": 100})
    return sorted(page["items"], key=lambda d: d["id"])


def _wait_rollout_state(gw: GatewayServer, rollout_id: int, state: str) -> str:
    """Until the gateway's snapshot has the rollout in `state`; returns its cohort salt."""
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        snap = gw.state.store.snapshot
        rollout = next((r for r in snap.rollouts if r.id == rollout_id), None) if snap else None
        if rollout is not None and rollout.state.value == state:
            return rollout.cohort_salt
        time.sleep(0.05)
    raise AssertionError(f"the gateway never saw rollout {rollout_id} in {state}")


def _send(client: openai.OpenAI, request_id: str, prompt: str) -> tuple[str, int]:
    """One code request at T=0; returns its decision header and completion tokens."""
    raw = client.chat.completions.with_raw_response.create(
        model="tiny",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        user=request_id,
        extra_headers={"x-request-id": request_id, "x-specroute-task": "code"},
    )
    completion = raw.parse()
    assert completion.choices[0].message.content
    assert completion.usage is not None
    return raw.headers["x-specroute-decision"], completion.usage.completion_tokens


def _windows(database: Database, rollout_id: int) -> list[TelemetryWindowRow]:
    with database.session() as s:
        rows = list(
            s.scalars(select(TelemetryWindowRow).where(TelemetryWindowRow.rollout_id == rollout_id))
        )
        s.expunge_all()
        return rows


def _wait_windows(
    database: Database, rollout_id: int, *, spec: int, baseline: int, timeout_s: float = 30.0
) -> list[TelemetryWindowRow]:
    """Until control holds at least this many requests per arm for the rollout."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = _windows(database, rollout_id)
        counts = {a: sum(r.requests for r in rows if r.arm == a) for a in ("spec", "baseline")}
        if counts["spec"] >= spec and counts["baseline"] >= baseline:
            return rows
        assert time.monotonic() < deadline, f"telemetry in control: {counts}"
        time.sleep(0.2)


def test_a_draft_goes_offline_shadow_canary_on_real_engines(
    tmp_path: Path, vllm_spec_server: RunningServer, vllm_baseline_server: RunningServer
) -> None:
    servers = {"spec": vllm_spec_server, "baseline": vllm_baseline_server}
    with (
        serve_control(tmp_path, ADMIN, INTERNAL) as control,
        automation_worker(control.settings) as worker,
    ):
        admin = AdminClient(control.url, ADMIN)
        parts = _register(admin, tmp_path / "prompts.jsonl")
        with engine_agents(admin, control.url, parts["pools"], servers, prefix="lifecycle"):
            _offline_into_shadow(admin, worker, control, vllm_spec_server, parts)
            with run_control_gateway(tmp_path / "gw", control.url, INTERNAL) as gw:
                wait_routable(gw)
                _shadow_into_canary(admin, worker, control, gw, parts)
        admin.close()


def _offline_into_shadow(
    admin: AdminClient,
    worker: Celery,
    control: ControlPlane,
    spec_server: RunningServer,
    parts: dict[str, Any],
) -> None:
    rollout_id = parts["rollout_id"]
    # No evaluation yet: `start` names the missing evidence and what to run.
    refused = admin.http.post(f"/rollouts/{rollout_id}/start", json={"reason": "too early"})
    assert refused.status_code == 409, refused.text
    body = refused.json()
    assert "missing_evidence" in refused.text and "offline_evaluation" in refused.text, body
    assert "specroute engine evaluate" in refused.text
    offline = admin.call("POST", f"/rollouts/{rollout_id}/evaluate", json={"reason": "evaluate"})
    assert offline["state"] == "offline"
    waiting = _outcome(_run_task(worker, "advance_offlines"), rollout_id)
    assert waiting["action"] == "wait" and "no offline evaluation" in waiting["reason"]

    result = CliRunner().invoke(
        engine_app,
        [
            "evaluate",
            "--pair-version",
            str(parts["version_id"]),
            "--eval-set",
            "code-evals",
            "--url",
            control.url,
            "--token",
            ADMIN,
            "--engine-url",
            spec_server.base_url,
            "--max-tokens",
            str(MAX_TOKENS),
            "--no-perplexity",
        ],
    )
    assert result.exit_code == 0, result.output
    [evaluation] = admin.evaluations.list(pair_version_id=parts["version_id"])
    assert evaluation["eval_set_id"] == parts["eval_set_id"]
    assert evaluation["cases"] == len(CODE_PROMPTS) and evaluation["drafts"] > 0
    assert evaluation["mean_acceptance_length"] >= THRESHOLDS["offline_min_mean_acceptance_length"]

    moved = _outcome(_run_task(worker, "advance_offlines"), rollout_id)
    assert (moved["action"], moved["to_state"]) == ("start", "shadow"), moved
    rollout = admin.call("GET", f"/rollouts/{rollout_id}")
    assert (rollout["state"], rollout["percentage"]) == ("shadow", 100.0)
    passed = _decisions(admin, rollout_id)[-1]
    assert (passed["kind"], passed["from_state"], passed["to_state"]) == (
        "offline_passed",
        "offline",
        "shadow",
    )
    assert passed["actor"] == "automation" and passed["task_id"]
    gate = passed["evidence"]["gates"]["offline_evaluation"]
    assert gate["holds"] is True and gate["evaluation_id"] == evaluation["id"]
    record = admin.http.get(f"/decisions/{passed['id']}/record")
    assert record.status_code == 200
    assert "The shadow starts: 100 % of the segment's requests" in record.text


def _shadow_into_canary(
    admin: AdminClient,
    worker: Celery,
    control: ControlPlane,
    gw: GatewayServer,
    parts: dict[str, Any],
) -> None:
    rollout_id = parts["rollout_id"]
    database = Database(control.db_url)
    client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=parts["key"], max_retries=0)
    _wait_rollout_state(gw, rollout_id, "shadow")

    # Shadow: callers served by baseline; every request mirrored to the spec pool.
    served_tokens = 0
    sent = 0
    outcome: dict[str, Any] = {}
    # NOTE: up to 12 rounds: on a loaded machine the mirrors' evidence at the canary's
    # projected load takes longer to settle (6 rounds held once under CI load).
    for _round in range(12):
        for prompt in CODE_PROMPTS[:8]:
            header, completion_tokens = _send(client, f"shadow-{sent}", prompt)
            assert header == "arm=baseline; reason=shadow"
            served_tokens += completion_tokens
            sent += 1
        rows = _wait_windows(database, rollout_id, spec=sent, baseline=sent)
        outcome = _outcome(_run_task(worker, "evaluate_shadows"), rollout_id)
        if outcome["action"] != "hold":
            break
    assert (outcome["action"], outcome["to_state"]) == ("start", "canary"), outcome

    # What control judged: the callers' requests on baseline, their copies on spec.
    base = [r for r in rows if r.arm == "baseline"]
    spec = [r for r in rows if r.arm == "spec"]
    assert sum(r.requests for r in base) == sent == sum(r.requests for r in spec)
    assert sum(r.completion_tokens for r in base) == served_tokens
    assert sum(r.drafts for r in base) == 0
    assert sum(r.errors + r.cancellations for r in spec) == 0
    assert 0 < sum(r.completion_tokens for r in spec) <= sent * MAX_TOKENS
    drafted = sum(r.drafted_tokens for r in spec)
    assert 0 < sum(r.accepted_tokens for r in spec) <= drafted
    assert {r.pair_version_id for r in spec} == {parts["version_id"]}

    rollout = admin.call("GET", f"/rollouts/{rollout_id}")
    assert (rollout["state"], rollout["percentage"]) == ("canary", STAGES[0])
    started = _decisions(admin, rollout_id)[-1]
    assert (started["kind"], started["from_state"], started["to_state"]) == (
        "shadow_passed",
        "shadow",
        "canary",
    )
    assert started["actor"] == "automation"
    assert all(started["evidence"]["verdict"]["checks"].values())
    assert set(started["evidence"]["window_ids"]) <= {r.id for r in rows}
    assert 0 < started["evidence"]["statistics"]["spec"]["requests"] <= sent
    record = admin.http.get(f"/decisions/{started['id']}/record").text
    assert record.startswith("# Start rollout")
    assert "The canary starts: 50 % of the segment's cohorts" in record
    # Judged at the load the canary will bring: half the segment, where the shadow mirrored
    # all of it, so no more than the shadow measured.
    projection = started["evidence"]["statistics"]["next_stage"]
    assert projection["target"] == "canary's first stage"
    assert (projection["share_now"], projection["share_next"]) == (100.0, 50.0)
    assert projection["spec_load_next"] == projection["spec_load_now"]
    assert "- Canary's first stage 50 %: projected" in record

    # Canary: each caller's cohort picks the arm, and the arms' telemetry follows.
    salt = _wait_rollout_state(gw, rollout_id, "canary")
    before = {r.id for r in _windows(database, rollout_id)}
    arms: dict[str, int] = {"spec": 0, "baseline": 0}
    canary_tokens: dict[str, int] = {"spec": 0, "baseline": 0}
    for i in range(12):
        user = f"canary-{i}"
        header, completion_tokens = _send(client, user, CODE_PROMPTS[i % len(CODE_PROMPTS)])
        arm = "spec" if in_spec_cohort(salt, "acme", user, STAGES[0]) else "baseline"
        if arm == "spec":
            assert header == "arm=spec; pair=tiny-v1; k=3; reason=cohort_spec"
        else:
            assert header == "arm=baseline; reason=cohort_baseline"
        arms[arm] += 1
        canary_tokens[arm] += completion_tokens
    assert arms["spec"] > 0 and arms["baseline"] > 0, arms
    rows = [
        r
        for r in _wait_windows(
            database, rollout_id, spec=sent + arms["spec"], baseline=sent + arms["baseline"]
        )
        if r.id not in before
    ]
    for arm in ("spec", "baseline"):
        mine = [r for r in rows if r.arm == arm]
        assert sum(r.requests for r in mine) == arms[arm]
        assert sum(r.completion_tokens for r in mine) == canary_tokens[arm]
    assert sum(r.drafts for r in rows if r.arm == "spec") > 0
    database.dispose()
