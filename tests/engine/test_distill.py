"""`specroute engine distill` on the bundled target: a draft vLLM could pair with, its
checkpoints, resumption, model card, and the leakage guard against eval sets."""

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from engine.cli import app as engine_app
from engine.distill.leakage import ngram_hashes, overlapping
from engine.pools.local import tiny_pair_dir
from specwire.artifacts import check_pair
from specwire.prompts import prompt_digest
from tests.gateway.server import serve_control

ADMIN = "distill-admin-token"
CHATS = [
    "def fibonacci(n): return the nth number of the sequence",
    "Write a function that sorts a list of integers in place",
    "Explain what a hash map is and when to use one in Python",
    "for i in range(10): print the square of every even number",
    "class Stack with push and pop methods and a size property",
    "Tell me a short story about a cat who learns to program",
]


def _prompts(path: Path, texts: list[str]) -> Path:
    path.write_text(
        "\n".join(json.dumps({"messages": [{"role": "user", "content": t}]}) for t in texts)
    )
    return path


def test_leakage_counts_training_prompts_sharing_hashed_ngrams() -> None:
    held_out = ["please " + CHATS[0] + " in one line"]
    assert overlapping(CHATS, held_out) == 1
    assert overlapping(CHATS[1:], held_out) == 0
    chat = [{"role": "user", "content": CHATS[2]}]
    assert overlapping([chat], [CHATS[2]]) == 1
    assert ngram_hashes("a b c", 8) == ngram_hashes("A  b c", 8)


def test_distill_writes_a_pairable_draft_resumes_and_documents_itself(tmp_path: Path) -> None:
    target = tiny_pair_dir() / "target"
    prompts = _prompts(tmp_path / "train.jsonl", CHATS)
    out = tmp_path / "draft"
    args = ["distill", "--target", str(target), "--prompts", str(prompts), "--out", str(out)]
    tiny = ["--batch-size", "2", "--new-tokens", "8", "--checkpoint-every", "2"]
    first = CliRunner().invoke(engine_app, [*args, *tiny, "--steps", "4"])
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-2", "step-4"]
    summary = json.loads((out / "distill.json").read_text())
    assert (summary["steps"], summary["layers"], summary["target_layers"]) == (4, 1, 4)
    assert summary["resumed_from"] is None
    assert summary["final_loss"] < summary["first_loss"]
    # Same tokenizer and vocabulary, CPU-servable head dim: registration would accept it.
    pair = check_pair(target, out)
    assert pair.vocab_size == 4096
    assert (out / "tokenizer.json").read_bytes() == (target / "tokenizer.json").read_bytes()

    again = CliRunner().invoke(engine_app, [*args, *tiny, "--steps", "6"])
    assert again.exit_code == 0, again.output
    resumed = json.loads((out / "distill.json").read_text())
    assert (resumed["steps"], resumed["resumed_from"]) == (6, 4)
    card = (out / "README.md").read_text()
    assert "resumed from step 4" in card and "train.jsonl@sha256:" in card
    assert "0 training prompts overlap no eval set checked" in card


@pytest.fixture
def control_url(tmp_path: Path) -> Iterator[str]:
    with serve_control(tmp_path, ADMIN) as control:
        yield control.url


def test_distill_refuses_prompts_that_overlap_an_eval_set(control_url: str, tmp_path: Path) -> None:
    held_out = [{"role": "user", "content": CHATS[3]}]
    store = tmp_path / "evals.jsonl"
    store.write_text(json.dumps({"ref": "e0", "messages": held_out}))
    case = {
        "case_key": "loop",
        "why": "loops",
        "source": "curated",
        "reviewer": "bob",
        "supports": "code policy",
        "refresh_by": "2999-01-01",
        "prompt_ref": "e0",
        "prompt_sha256": prompt_digest(held_out),
    }
    created = httpx.post(
        control_url + "/admin/v1/eval-sets",
        json={"name": "code-evals", "prompt_store": f"file://{store}", "cases": [case]},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert created.status_code == 201, created.text
    prompts = _prompts(tmp_path / "train.jsonl", CHATS)
    args = [
        "distill",
        "--target",
        str(tiny_pair_dir() / "target"),
        "--prompts",
        str(prompts),
        "--out",
        str(tmp_path / "draft"),
        "--eval-set",
        "code-evals",
        "--url",
        control_url,
        "--token",
        ADMIN,
        "--steps",
        "1",
        "--new-tokens",
        "4",
    ]
    refused = CliRunner().invoke(engine_app, args)
    assert refused.exit_code == 1
    assert "refusing: 1 of 6 training prompts overlap eval set(s) code-evals" in refused.output
    assert not (tmp_path / "draft").exists()
    warned = CliRunner().invoke(engine_app, [*args, "--allow-leakage"])
    assert warned.exit_code == 0, warned.output
    assert "warning: 1 of 6 training prompts overlap" in warned.output
    card = (tmp_path / "draft" / "README.md").read_text()
    assert "1 training prompts overlap code-evals" in card
