"""`specroute engine evaluate` end to end against a real control plane (SQLite, over
HTTP) and the fake upstream engine, one of whose cases fails: the failure is the case's
outcome, the evaluation of the others is posted, and the exit code says so; `--out`
keeps the exact body posted, also when control is gone, to post later."""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from control.cli import app as control_app
from engine.agent.metrics import parse_engine_metrics
from engine.cli import app as engine_app
from engine.evaluation import run
from engine.fake import FakeUpstream
from specwire import SpecCounters
from specwire.prompts import prompt_digest
from tests.control.conftest import write_model_dir
from tests.engine.failing_engine import FailingEngine
from tests.gateway.server import free_port, serve_app, serve_control

ADMIN = "evaluate-command-token"
TOKENS = 16
PROMPTS = ["def f():", "for i in range(3):", "FAIL-ME please", "import os"]


@dataclass
class Setup:
    control_url: str
    api: httpx.Client
    version_id: int
    case_keys: list[str]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    with (
        serve_control(tmp_path, ADMIN, model_roots=[tmp_path]) as control,
        httpx.Client(
            base_url=control.url + "/admin/v1",
            headers={"Authorization": f"Bearer {ADMIN}"},
            timeout=30,
        ) as api,
    ):
        target, draft = write_model_dir(tmp_path / "target"), write_model_dir(tmp_path / "draft")
        pair = _created(api.post("/pairs", json={"name": "tiny"}))
        version = _created(
            api.post(
                f"/pairs/{pair['id']}/versions",
                json={
                    "method": "draft_model",
                    "target_ref": str(target),
                    "draft_ref": str(draft),
                    "num_speculative_tokens": 3,
                },
            )
        )
        store = tmp_path / "prompts.jsonl"
        cases: list[dict[str, Any]] = []
        with store.open("w") as f:
            for i, text in enumerate(PROMPTS):
                messages = [{"role": "user", "content": text}]
                f.write(json.dumps({"ref": f"p{i}", "messages": messages}) + "\n")
                cases.append(
                    {
                        "case_key": f"case-{i}",
                        "labels": {"task": "code" if i % 2 else "chat"},
                        "why": "the segment's typical prompts",
                        "source": "curated",
                        "reviewer": "alice",
                        "supports": "code segment policy",
                        "refresh_by": "2999-01-01",
                        "prompt_ref": f"p{i}",
                        "prompt_sha256": prompt_digest(messages),
                    }
                )
        body = {"name": "evals", "prompt_store": f"file://{store}", "cases": cases}
        _created(api.post("/eval-sets", json=body))
        yield Setup(control.url, api, int(version["id"]), [c["case_key"] for c in cases])


def _created(response: httpx.Response) -> Any:
    assert response.status_code == 201, response.text
    return response.json()


def _evaluate(setup: Setup, engine_url: str, *extra: str) -> Result:
    args = [
        "evaluate",
        "--pair-version",
        str(setup.version_id),
        "--eval-set",
        "evals",
        "--url",
        setup.control_url,
        "--token",
        ADMIN,
        "--engine-url",
        engine_url,
        "--max-tokens",
        str(TOKENS),
        "--cost-ratio",
        "0.1",
        "--no-perplexity",
        *extra,
    ]
    return CliRunner(env={"COLUMNS": "200"}).invoke(engine_app, args)


def _posted(setup: Setup) -> list[dict[str, Any]]:
    items = setup.api.get("/evaluations", params={"pair_version_id": setup.version_id})
    return list(items.json()["items"])


def test_a_case_the_engine_fails_is_recorded_and_the_others_are_posted(setup: Setup) -> None:
    engine = FailingEngine(FakeUpstream(TOKENS, 0.001, "tiny"), "FAIL-ME", "event")
    with serve_app(engine) as engine_url:
        strict = _evaluate(setup, engine_url)
        tolerant = _evaluate(setup, engine_url, "--max-failed-cases", "1")
    # Default --max-failed-cases 0: posted with the failure recorded, then exit 1.
    assert strict.exit_code == 1, strict.output
    assert "1 of 4 cases failed on the engine" in strict.output
    assert "case-2 (case-2: engine error" in strict.output
    assert "more than --max-failed-cases 0: exit 1" in strict.output
    assert tolerant.exit_code == 0, tolerant.output
    assert "1 of 4 cases failed on the engine" in tolerant.output

    second, first = _posted(setup)  # newest first
    for posted in (first, second):
        # Three measured cases of 8 verification steps each, half of them accepting one
        # draft: mean acceptance length 1.5; the failed case counts in no aggregate.
        assert posted["cases"] == 3 and posted["case_result_count"] == 4
        assert posted["drafts"] == 24
        assert posted["mean_acceptance_length"] == pytest.approx(1.5)
        assert posted["position_acceptance"] == pytest.approx([0.5, 0.0, 0.0])
        assert posted["slices"]["task=chat"]["cases"] == 1
        assert posted["slices"]["task=code"]["cases"] == 2
    rows = setup.api.get(f"/evaluations/{first['id']}/cases").json()["items"]
    by_key = {r["case_key"]: r for r in rows}
    assert {k: r["outcome"] for k, r in by_key.items()} == {
        "case-0": "ok",
        "case-1": "ok",
        "case-2": "error",
        "case-3": "ok",
    }
    assert (by_key["case-2"]["drafts"], by_key["case-2"]["acceptance_rate"]) == (0, None)
    assert by_key["case-0"]["drafts"] == 8


def test_an_engine_failing_every_case_posts_nothing_and_exits_1(setup: Setup) -> None:
    engine = FailingEngine(FakeUpstream(TOKENS, 0.001, "tiny"), '"user"', "status")
    with serve_app(engine) as engine_url:
        result = _evaluate(setup, engine_url, "--max-failed-cases", "10")
    assert result.exit_code == 1, result.output
    assert engine.failed == 4
    assert "every one of the 4 cases failed on the engine; nothing posted" in result.output
    assert "engine answered 500" in result.output
    assert _posted(setup) == []


def test_out_holds_the_exact_body_posted(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[dict[str, Any]] = []
    real_post = run.post_evaluation

    def spy(api: Any, body: dict[str, Any]) -> dict[str, Any]:
        sent.append(json.loads(json.dumps(body)))
        return real_post(api, body)

    monkeypatch.setattr(run, "post_evaluation", spy)
    out = tmp_path / "evaluation.json"
    engine = FailingEngine(FakeUpstream(TOKENS, 0.001, "tiny"), "FAIL-ME", "status")
    with serve_app(engine) as engine_url:
        result = _evaluate(setup, engine_url, "--out", str(out), "--max-failed-cases", "1")
        printed = tmp_path / "not-posted.json"
        unposted = _evaluate(setup, engine_url, "--out", str(printed), "--no-post")
    assert result.exit_code == 0, result.output
    # --no-post: written, nothing posted; the cost ratio is given, so the same body.
    assert unposted.exit_code == 1 and "1 of 4 cases failed on the engine" in unposted.output
    assert json.loads(printed.read_text()) == json.loads(out.read_text())
    assert f"evaluation body written to {out}" in result.output
    (body,) = sent
    assert json.loads(out.read_text()) == body
    assert body["case_keys"] == setup.case_keys and body["drafts"] == 24
    assert body["acceptance_source"] == "per_request"
    assert [r["outcome"] for r in body["case_results"]] == ["ok", "ok", "error", "ok"]
    (posted,) = _posted(setup)
    assert (posted["drafts"], posted["cases"], posted["case_result_count"]) == (24, 3, 4)


def test_out_keeps_the_body_when_control_is_gone_and_it_posts_later(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Control answers while the evaluation resolves its cases, then is unreachable.
    real_post = run.post_evaluation

    def post_to_nowhere(api: Any, body: dict[str, Any]) -> dict[str, Any]:
        with run.admin_client(f"http://127.0.0.1:{free_port()}", ADMIN) as gone:
            return real_post(gone, body)

    monkeypatch.setattr(run, "post_evaluation", post_to_nowhere)
    out = tmp_path / "kept.json"
    engine = FailingEngine(FakeUpstream(TOKENS, 0.001, "tiny"), "FAIL-ME", "event")
    with serve_app(engine) as engine_url:
        result = _evaluate(setup, engine_url, "--out", str(out))
    assert result.exit_code == 1, result.output
    assert "control refused the evaluation" in result.output
    assert f"the body is kept in {out}" in result.output
    assert _posted(setup) == []
    kept = json.loads(out.read_text())
    assert kept["pair_version_id"] == setup.version_id and kept["drafts"] == 24
    assert kept["mean_acceptance_length"] == pytest.approx(1.5)

    # Posted later, as it was kept: the same evaluation, the engine's failure included.
    later = CliRunner(
        env={"SPECROUTE_ADMIN_URL": setup.control_url, "SPECROUTE_ADMIN_TOKEN": ADMIN}
    ).invoke(control_app, ["admin", "evaluation", "create", "--results", str(out)])
    assert later.exit_code == 0, later.output
    (posted,) = _posted(setup)
    assert (posted["drafts"], posted["cases"], posted["case_result_count"]) == (24, 3, 4)
    assert posted["position_acceptance"] == kept["position_acceptance"]
    rows = setup.api.get(f"/evaluations/{posted['id']}/cases").json()["items"]
    assert {r["case_key"]: r["outcome"] for r in rows}["case-2"] == "error"


def _counters(engine_url: str) -> SpecCounters:
    metrics = parse_engine_metrics(httpx.get(engine_url + "/metrics").text)
    assert metrics.spec is not None
    return metrics.spec


def test_an_engine_without_per_request_metrics_is_evaluated_from_its_counters(
    setup: Setup, tmp_path: Path
) -> None:
    fake = FakeUpstream(TOKENS, 0.001, "tiny", per_request_metrics=False, spec_counters=True)
    out = tmp_path / "counters.json"
    with serve_app(fake) as engine_url:
        # Earlier traffic: the counters do not start at zero, only their difference counts.
        for _ in range(2):
            body = {"model": "tiny", "prompt": "x", "max_tokens": TOKENS}
            assert httpx.post(engine_url + "/v1/completions", json=body).status_code == 200
        before = _counters(engine_url)
        result = _evaluate(setup, engine_url, "--out", str(out))
        after = _counters(engine_url)
    assert result.exit_code == 0, result.output
    assert before.num_drafts == 16 and after.num_drafts == 48
    steps = after.num_drafts - before.num_drafts
    per_position = [
        a - b
        for a, b in zip(after.accepted_per_position, before.accepted_per_position, strict=True)
    ]
    reached = [steps, *per_position]
    (posted,) = _posted(setup)
    assert posted["acceptance_source"] == "engine_counters"
    assert posted["drafts"] == steps == 32
    assert posted["position_acceptance"] == pytest.approx(
        [reached[i + 1] / reached[i] if reached[i] else 0.0 for i in range(3)]
    )
    assert posted["mean_acceptance_length"] == pytest.approx(1 + sum(per_position) / steps)
    assert posted["mean_acceptance_length"] == pytest.approx(1.5)
    assert posted["cases"] == 4 and posted["slices"] == {}
    # Every case ran and has its outcome; none has an acceptance of its own.
    rows = setup.api.get(f"/evaluations/{posted['id']}/cases").json()["items"]
    assert [(r["outcome"], r["drafts"], r["accepted_per_position"]) for r in rows] == [
        ("ok", None, None)
    ] * 4
    assert {r["acceptance_rate"] for r in rows} == {None}
    kept = json.loads(out.read_text())
    assert kept["acceptance_source"] == "engine_counters"
    assert "acceptance from the engine's vllm:spec_decode_* counters" in result.output
    assert "by label: not measured" in result.output


def test_an_engine_with_neither_source_stops_after_one_case_with_the_flag_to_add(
    setup: Setup,
) -> None:
    fake = FakeUpstream(TOKENS, 0.001, "tiny", per_request_metrics=False)
    with serve_app(fake) as engine_url:
        result = _evaluate(setup, engine_url)
    assert result.exit_code == 1, result.output
    assert "gives no acceptance to measure" in result.output
    assert "--per-request-spec-decode-metrics detailed" in result.output
    # The first case ran alone (8 steps each), the other three never did.
    assert fake.drafts == 8
    assert _posted(setup) == []


class SharedEngine(FakeUpstream):
    """Another client's response alongside each case's: the counters count both."""

    def _count(self) -> None:
        super()._count()
        super()._count()


def test_counters_an_other_client_moved_stop_the_evaluation(setup: Setup) -> None:
    fake = SharedEngine(TOKENS, 0.001, "tiny", per_request_metrics=False, spec_counters=True)
    with serve_app(fake) as engine_url:
        result = _evaluate(setup, engine_url)
    assert result.exit_code == 1, result.output
    assert "the engine generated 128 tokens during the evaluation but its cases" in result.output
    assert "received 64: another client used it" in result.output
    assert _posted(setup) == []


class PartlyRunFailure(FailingEngine):
    """Fails the marked case after its engine ran 10 steps that accepted nothing and
    generated 3 tokens: work the counters hold though no case completed with it."""

    async def _fail(self, send: Any) -> None:
        self.inner.drafts += 10
        self.inner.draft_tokens += 30
        self.inner.generated += 3
        await super()._fail(send)


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_a_failed_cases_partial_work_is_left_out_of_the_counters_at_concurrency_1(
    setup: Setup, concurrency: str
) -> None:
    fake = FakeUpstream(TOKENS, 0.001, "tiny", per_request_metrics=False, spec_counters=True)
    engine = PartlyRunFailure(fake, "FAIL-ME", "event")
    with serve_app(engine) as engine_url:
        result = _evaluate(
            setup, engine_url, "--max-failed-cases", "1", "--concurrency", concurrency
        )
    assert result.exit_code == 0, result.output
    assert engine.failed == 1
    (posted,) = _posted(setup)
    assert (posted["acceptance_source"], posted["cases"]) == ("engine_counters", 3)
    if concurrency == "1":
        # The three completed cases' 8 steps each, every one accepting one draft in two.
        assert posted["drafts"] == 24
        assert posted["mean_acceptance_length"] == pytest.approx(1.5)
        assert "the 1 failed cases' own 10 steps, read around each, left out" in result.output
    else:
        # In flight together, the failed case's steps cannot be told apart: they stay,
        # and the evaluation says so.
        assert posted["drafts"] == 34
        assert posted["mean_acceptance_length"] == pytest.approx(1 + 12 / 34)
        assert "its partial work, if any, is in the counters" in result.output
        assert "--concurrency 1 reads it around each case" in result.output


class CountingMetrics:
    """The fake engine, counting the GETs of its /metrics."""

    def __init__(self, inner: FakeUpstream) -> None:
        self.inner = inner
        self.metrics_reads = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/metrics":
            self.metrics_reads += 1
        await self.inner(scope, receive, send)


def test_per_request_metrics_need_no_counter_reads_around_each_case(setup: Setup) -> None:
    fake = FakeUpstream(TOKENS, 0.001, "tiny", per_request_metrics=True, spec_counters=True)
    engine = CountingMetrics(fake)
    with serve_app(engine) as engine_url:
        result = _evaluate(setup, engine_url, "--concurrency", "1")
    assert result.exit_code == 0, result.output
    assert _posted(setup)[0]["acceptance_source"] == "per_request"
    # Before and after the run only; the first case, run before the source is known,
    # is read around as well.
    assert engine.metrics_reads == 3
