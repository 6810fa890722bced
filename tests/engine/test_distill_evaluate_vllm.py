"""Bring your own target, end to end on the engine side: distil a draft for the bundled
target from a prompt file with tiny settings, register the pair, and evaluate it in a
vLLM server `specroute engine evaluate` starts itself."""

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from engine.cli import app as engine_app
from engine.pools.local import tiny_pair_dir
from specwire.prompts import prompt_digest
from tests.gateway.server import serve_control

pytestmark = pytest.mark.vllm

ADMIN = "byo-admin-token"
TRAIN = [
    "def add(a, b): return the sum of two numbers",
    "Write a loop that prints the numbers from one to ten",
    "class Point with x and y coordinates and a distance method",
    "import json and load a file into a dictionary",
]
EVAL = ["def multiply(x, y):", "Tell me about the sea."]


@pytest.fixture
def control_url(tmp_path: Path) -> Iterator[str]:
    with serve_control(
        tmp_path, ADMIN, "unused-internal-token", model_roots=[tmp_path, tiny_pair_dir()]
    ) as control:
        yield control.url


def test_distilled_draft_is_registered_and_evaluated_in_vllm(
    control_url: str, tmp_path: Path
) -> None:
    target = tiny_pair_dir() / "target"
    train = tmp_path / "train.jsonl"
    train.write_text(
        "\n".join(json.dumps({"messages": [{"role": "user", "content": t}]}) for t in TRAIN)
    )
    draft = tmp_path / "my-draft"
    distilled = CliRunner().invoke(
        engine_app,
        [
            "distill",
            "--target",
            str(target),
            "--prompts",
            str(train),
            "--out",
            str(draft),
            "--steps",
            "6",
            "--batch-size",
            "2",
            "--new-tokens",
            "16",
            "--checkpoint-every",
            "3",
        ],
    )
    assert distilled.exit_code == 0, distilled.output
    training_set = json.loads((draft / "distill.json").read_text())["training_set"]

    api = httpx.Client(
        base_url=control_url + "/admin/v1", headers={"Authorization": f"Bearer {ADMIN}"}
    )
    pair = api.post("/pairs", json={"name": "byo"}).json()
    registered = api.post(
        f"/pairs/{pair['id']}/versions",
        json={
            "method": "draft_model",
            "target_ref": str(target),
            "draft_ref": str(draft),
            "num_speculative_tokens": 2,
        },
    )
    assert registered.status_code == 201, registered.text
    version = registered.json()
    store = tmp_path / "evals.jsonl"
    cases = []
    with store.open("w") as f:
        for i, text in enumerate(EVAL):
            messages = [{"role": "user", "content": text}]
            f.write(json.dumps({"ref": f"e{i}", "messages": messages}) + "\n")
            cases.append(
                {
                    "case_key": f"e{i}",
                    "labels": {"task": "code" if i == 0 else "chat"},
                    "why": "smoke",
                    "source": "curated",
                    "reviewer": "carol",
                    "supports": "byo walkthrough",
                    "refresh_by": "2999-01-01",
                    "prompt_ref": f"e{i}",
                    "prompt_sha256": prompt_digest(messages),
                }
            )
    made = api.post(
        "/eval-sets", json={"name": "byo", "prompt_store": f"file://{store}", "cases": cases}
    )
    assert made.status_code == 201, made.text

    evaluated = CliRunner().invoke(
        engine_app,
        [
            "evaluate",
            "--pair-version",
            str(version["id"]),
            "--eval-set",
            "byo",
            "--url",
            control_url,
            "--token",
            ADMIN,
            "--max-tokens",
            "16",
            "--training-set",
            training_set,
            "--log-dir",
            str(tmp_path / "logs"),
        ],
    )
    assert evaluated.exit_code == 0, evaluated.output
    [posted] = api.get("/evaluations", params={"pair_version_id": version["id"]}).json()["items"]
    assert posted["cases"] == 2 and posted["training_set"] == training_set
    assert len(posted["position_acceptance"]) == 2 and posted["drafts"] > 0
    assert 1.0 <= posted["mean_acceptance_length"] <= 3.0
    assert set(posted["expected_speedup"]) == {"1", "2", "3", "5"}
    assert set(posted["slices"]) == {"task=code", "task=chat"}
