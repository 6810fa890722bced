"""`specroute engine evaluate` on the real tiny pair in vLLM, against a real control plane:
the offline evaluation it posts, checked against the engine's own counters; and on a
server started without per-request metrics, acceptance read from those counters."""

import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from engine.agent.metrics import parse_engine_metrics
from engine.cli import app as engine_app
from engine.evaluation.measure import tokens_per_pass
from engine.pools.launcher import LaunchOptions, build_server_command
from engine.pools.local import tiny_pair_dir, tiny_spec_pool
from engine.pools.server import VllmServer
from specwire import SpecCounters
from specwire.prompts import prompt_digest
from tests.fixtures.vllm import (
    STARTUP_TIMEOUT_S,
    RunningServer,
    free_port,
    require_tiny_pair,
)
from tests.gateway.server import serve_control

pytestmark = pytest.mark.vllm

ADMIN = "evaluate-admin-token"
PROMPTS = [
    ("code", "def fibonacci(n):"),
    ("code", "for i in range(10):"),
    ("code", "import numpy as np\n"),
    ("chat", "Tell me a story about a cat."),
    ("chat", "What is the capital of France?"),
    ("chat", "Write a haiku about rain."),
]


@pytest.fixture
def control_url(tmp_path: Path) -> Iterator[str]:
    with serve_control(tmp_path, ADMIN) as control:
        yield control.url


def _api(url: str) -> httpx.Client:
    return httpx.Client(
        base_url=url + "/admin/v1", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30
    )


def _created(response: httpx.Response) -> Any:
    assert response.status_code == 201, response.text
    return response.json()


def _tiny_version(api: httpx.Client) -> Any:
    """The bundled tiny pair registered as a draft_model version (k = 3)."""
    pair_dir = tiny_pair_dir()
    pair = _created(api.post("/pairs", json={"name": "tiny"}))
    return _created(
        api.post(
            f"/pairs/{pair['id']}/versions",
            json={
                "method": "draft_model",
                "target_ref": str(pair_dir / "target"),
                "draft_ref": str(pair_dir / "draft"),
                "num_speculative_tokens": 3,
            },
        )
    )


def _eval_set(
    api: httpx.Client,
    store: Path,
    prompts: list[tuple[str, str]],
    overrides: Callable[[int, str], dict[str, Any]],
) -> Any:
    """Eval set `tiny-evals`: one case per prompt (its text in the `store` file), each
    case's fields the defaults below updated with `overrides(index, task)`."""
    cases = []
    with store.open("w") as f:
        for i, (task, text) in enumerate(prompts):
            messages = [{"role": "user", "content": text}]
            f.write(json.dumps({"ref": f"p{i}", "messages": messages}) + "\n")
            cases.append(
                {
                    "case_key": f"{task}-{i}",
                    "labels": {"task": task},
                    "why": "the segment's typical prompts",
                    "source": "curated",
                    "reviewer": "alice",
                    "supports": "code segment policy",
                    "refresh_by": "2999-01-01",
                    "prompt_ref": f"p{i}",
                    "prompt_sha256": prompt_digest(messages),
                    **overrides(i, task),
                }
            )
    body = {"name": "tiny-evals", "prompt_store": f"file://{store}", "cases": cases}
    return _created(api.post("/eval-sets", json=body))


def _engine_counter(server: RunningServer, name: str) -> float:
    text = httpx.get(server.base_url + "/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def test_evaluate_posts_an_offline_evaluation_measured_by_the_engine(
    control_url: str,
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
    tmp_path: Path,
) -> None:
    api = _api(control_url)
    version = _tiny_version(api)
    store = tmp_path / "prompts.jsonl"
    eval_set = _eval_set(
        api,
        store,
        PROMPTS,
        lambda i, task: {
            "labels": {"task": task, "temperature": "0"},
            "source": "curated" if task == "code" else "generated",
            # One case is past its refresh-by date: it is flagged on the evaluation.
            "refresh_by": "2000-01-01" if i == 5 else "2999-01-01",
        },
    )

    accepted_before = _engine_counter(
        vllm_spec_server, "vllm:spec_decode_num_accepted_tokens_total"
    )
    drafts_before = _engine_counter(vllm_spec_server, "vllm:spec_decode_num_drafts_total")
    result = CliRunner().invoke(
        engine_app,
        [
            "evaluate",
            "--pair-version",
            str(version["id"]),
            "--eval-set",
            "tiny-evals",
            "--depths",
            "1,2,5",
            "--url",
            control_url,
            "--token",
            ADMIN,
            "--engine-url",
            vllm_spec_server.base_url,
            "--max-tokens",
            "24",
            "--training-set",
            "tiny-corpus",
            # Timed on the baseline server too: the cost ratio is measured, not estimated.
            "--baseline-url",
            vllm_baseline_server.base_url,
            "--concurrency",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "draft perplexity" in result.output and "1 stale cases flagged: chat-5" in result.output

    [posted] = api.get("/evaluations", params={"pair_version_id": version["id"]}).json()["items"]
    assert posted["eval_set_id"] == eval_set["id"] and posted["cases"] == 6
    assert posted["stale_case_keys"] == ["chat-5"]
    assert posted["training_set"] == "tiny-corpus"
    assert len(posted["position_acceptance"]) == 3
    assert all(0.0 <= r <= 1.0 for r in posted["position_acceptance"])
    assert set(posted["expected_speedup"]) == {"1", "2", "3", "5"}
    # The per-request histograms add up to what the engine counted over the same run.
    accepted = _engine_counter(vllm_spec_server, "vllm:spec_decode_num_accepted_tokens_total")
    drafts = _engine_counter(vllm_spec_server, "vllm:spec_decode_num_drafts_total")
    assert posted["drafts"] == drafts - drafts_before > 0
    measured_length = 1 + (accepted - accepted_before) / (drafts - drafts_before)
    assert posted["mean_acceptance_length"] == pytest.approx(measured_length)
    assert 1.0 <= posted["mean_acceptance_length"] <= 4.0
    assert set(posted["slices"]) == {"task=code", "task=chat", "temperature=0"}
    assert posted["slices"]["task=code"]["cases"] == 3
    assert posted["slices"]["temperature=0"]["drafts"] == posted["drafts"]
    assert posted["draft_perplexity"] is not None and posted["draft_perplexity"] > 1.0
    # The cost ratio the two engines showed, printed with its timings, is the one posted
    # and the one the closed form used.
    [printed] = re.findall(
        r"cost ratio (\d+\.\d+) \(measured: [\d.]+ ms per verification", result.output
    )
    assert (
        posted["cost_ratio"] == pytest.approx(float(printed), abs=1e-4)
        and posted["cost_ratio"] >= 0
    )
    assert posted["expected_speedup"]["3"] == pytest.approx(
        tokens_per_pass(posted["position_acceptance"], 3, 0.0) / (1 + 3 * posted["cost_ratio"])
    )

    # A changed prompt is refused before anything runs.
    store.write_text(store.read_text().replace("fibonacci", "factorial"))
    changed = CliRunner().invoke(
        engine_app,
        [
            "evaluate",
            "--pair-version",
            str(version["id"]),
            "--eval-set",
            "tiny-evals",
            "--url",
            control_url,
            "--token",
            ADMIN,
            "--engine-url",
            vllm_spec_server.base_url,
        ],
    )
    assert changed.exit_code == 1 and "sha256 mismatch" in changed.output


@pytest.fixture
def vllm_spec_server_without_per_request_metrics(tmp_path: Path) -> Iterator[VllmServer]:
    """A speculating tiny server started as the launcher does, less
    --per-request-spec-decode-metrics (which the launcher always adds)."""
    command = build_server_command(
        tiny_spec_pool(require_tiny_pair()), free_port(), LaunchOptions(cpu_cores="0")
    )
    argv = list(command.argv)
    at = argv.index("--per-request-spec-decode-metrics")
    del argv[at : at + 2]
    server = VllmServer(dataclasses.replace(command, argv=argv), tmp_path / "vllm.log")
    server.start()
    try:
        server.wait_ready(STARTUP_TIMEOUT_S)
        yield server
    finally:
        server.stop()


def test_evaluate_reads_acceptance_from_the_counters_of_an_engine_without_per_request_metrics(
    control_url: str, vllm_spec_server_without_per_request_metrics: VllmServer, tmp_path: Path
) -> None:
    engine_url = vllm_spec_server_without_per_request_metrics.base_url
    api = _api(control_url)
    version = _tiny_version(api)
    _eval_set(api, tmp_path / "prompts.jsonl", PROMPTS[:4], lambda i, task: {})

    def counters() -> SpecCounters:
        spec = parse_engine_metrics(httpx.get(engine_url + "/metrics").text).spec
        assert spec is not None
        return spec

    before = counters()
    result = CliRunner().invoke(
        engine_app,
        [
            "evaluate",
            "--pair-version",
            str(version["id"]),
            "--eval-set",
            "tiny-evals",
            "--url",
            control_url,
            "--token",
            ADMIN,
            "--engine-url",
            engine_url,
            "--max-tokens",
            "24",
            "--cost-ratio",
            "0.1",
            "--no-perplexity",
            "--concurrency",
            "2",
        ],
    )
    after = counters()
    assert result.exit_code == 0, result.output
    [posted] = api.get("/evaluations", params={"pair_version_id": version["id"]}).json()["items"]
    # The aggregate is the counters' difference over the run, exactly.
    steps = after.num_drafts - before.num_drafts
    reached = [steps] + [
        a - b
        for a, b in zip(after.accepted_per_position, before.accepted_per_position, strict=True)
    ]
    assert posted["acceptance_source"] == "engine_counters"
    assert posted["drafts"] == steps > 0 and posted["cases"] == 4
    assert posted["position_acceptance"] == pytest.approx(
        [reached[i + 1] / reached[i] if reached[i] else 0.0 for i in range(3)]
    )
    accepted = after.num_accepted_tokens - before.num_accepted_tokens
    assert posted["mean_acceptance_length"] == pytest.approx(1 + accepted / steps)
    assert posted["slices"] == {}
    rows = api.get(f"/evaluations/{posted['id']}/cases").json()["items"]
    assert [(r["outcome"], r["drafts"], r["acceptance_rate"]) for r in rows] == [
        ("ok", None, None)
    ] * 4
