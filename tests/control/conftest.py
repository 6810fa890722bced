"""Fixtures for the admin API tests: model directories and a seeded rollout setup."""

import json
from pathlib import Path
from typing import Any, TypedDict, cast

import httpx
import pytest
from fastapi.testclient import TestClient

# One example threshold set for the admin API tests and the hostile-input suite.
from tests.hostile.control_run import THRESHOLDS as THRESHOLDS


def write_model_dir(
    path: Path,
    *,
    vocab_size: int = 64,
    embedding_size: int | None = None,
    tokenizer: str = "tok-a",
    head_dim: int = 32,
) -> Path:
    """A minimal HF-format causal LM directory: everything registration reads
    (config, tokenizer, chat template, weights) and nothing it does not."""
    path.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": head_dim * 2,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "head_dim": head_dim,
        "vocab_size": embedding_size or vocab_size,
        "max_position_embeddings": 256,
    }
    (path / "config.json").write_text(json.dumps(config))
    vocab = {f"{tokenizer}-{i}": i for i in range(vocab_size)}
    tok = {"model": {"type": "BPE", "vocab": vocab, "merges": []}, "added_tokens": []}
    (path / "tokenizer.json").write_text(json.dumps(tok))
    (path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    (path / "model.safetensors").write_bytes(path.name.encode() * 16)
    return path


@pytest.fixture
def model_dirs(tmp_path: Path) -> dict[str, str]:
    return {
        "target": str(write_model_dir(tmp_path / "target")),
        "draft": str(write_model_dir(tmp_path / "draft")),
        "draft_other_vocab": str(write_model_dir(tmp_path / "draft-v", embedding_size=128)),
        "draft_bad_head_dim": str(write_model_dir(tmp_path / "draft-h", head_dim=48)),
        "draft_other_tokenizer": str(write_model_dir(tmp_path / "draft-t", tokenizer="tok-b")),
    }


def created(response: Any) -> dict[str, Any]:
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
def seeded(
    app_client: TestClient, admin_headers: dict[str, str], model_dirs: dict[str, str]
) -> dict[str, Any]:
    """Everything a rollout needs, created through the API."""
    return seed(app_client, admin_headers, model_dirs)


def rollout_parts(
    client: TestClient,
    headers: dict[str, str],
    dirs: dict[str, str],
    *,
    baseline_target: str | None = None,
) -> dict[str, Any]:
    """Pair, version, pools, segment and thresholds created through the API, and the
    body of a rollout over them (not posted). The baseline pool serves `dirs["target"]`
    unless `baseline_target` says otherwise."""
    pair = created(client.post("/admin/v1/pairs", json={"name": "tiny"}, headers=headers))
    version = created(
        client.post(
            f"/admin/v1/pairs/{pair['id']}/versions",
            json={
                "method": "draft_model",
                "target_ref": dirs["target"],
                "draft_ref": dirs["draft"],
                "num_speculative_tokens": 3,
            },
            headers=headers,
        )
    )
    spec = created(
        client.post(
            "/admin/v1/pools",
            json={
                "name": "tiny-spec",
                "served_model_name": "tiny",
                "target_ref": dirs["target"],
                "pair_version_id": version["id"],
            },
            headers=headers,
        )
    )
    baseline = created(
        client.post(
            "/admin/v1/pools",
            json={
                "name": "tiny-base",
                "served_model_name": "tiny",
                "target_ref": baseline_target or dirs["target"],
            },
            headers=headers,
        )
    )
    segment = created(
        client.post(
            "/admin/v1/segments",
            json={"name": "code", "selector": {"tasks": ["code"]}, "priority": 10},
            headers=headers,
        )
    )
    thresholds = created(
        client.post(
            "/admin/v1/threshold-sets", json={"name": "default", **THRESHOLDS}, headers=headers
        )
    )
    return {
        "pair": pair,
        "version": version,
        "spec_pool": spec,
        "baseline_pool": baseline,
        "segment": segment,
        "thresholds": thresholds,
        "body": {
            "name": "code-tiny",
            "segment_id": segment["id"],
            "pair_version_id": version["id"],
            "spec_pool_id": spec["id"],
            "baseline_pool_id": baseline["id"],
            "threshold_set_id": thresholds["id"],
            "stages": [1, 5, 25, 100],
        },
    }


def seed(client: TestClient, headers: dict[str, str], dirs: dict[str, str]) -> dict[str, Any]:
    """Everything a rollout needs and the rollout itself, created through the API."""
    parts = rollout_parts(client, headers, dirs)
    body = parts.pop("body")
    rollout = created(client.post("/admin/v1/rollouts", json=body, headers=headers))
    return {**parts, "rollout": rollout}


def eval_cases(n: int, *, refresh_by: str = "2999-01-01", stale: int = 0) -> list[dict[str, Any]]:
    """n cases with full lineage; the first `stale` are past their refresh-by date."""
    return [
        {
            "case_key": f"case-{i}",
            "labels": {"task": "code" if i % 2 else "chat", "language": "en"},
            "why": "covers the segment's common prompts",
            "source": "curated",
            "reviewer": "alice@example.com",
            "supports": "policy: code segment latency",
            "refresh_by": "2000-01-01" if i < stale else refresh_by,
            "prompt_ref": f"line:{i}",
            "prompt_sha256": f"{i:064x}",
        }
        for i in range(n)
    ]


def qualify_offline(
    client: TestClient,
    headers: dict[str, str],
    seeded: dict[str, Any],
    *,
    rates: tuple[float, ...] = (0.9, 0.8, 0.7),
    cases: int = 30,
) -> dict[str, Any]:
    """An eval set on the seeded segment and an offline evaluation of the seeded pair
    version on it (passing the default offline criteria with the default rates)."""
    eval_set = created(
        client.post(
            "/admin/v1/eval-sets",
            json={
                "name": "code-evals",
                "prompt_store": "file:///evals/code.jsonl",
                "cases": eval_cases(cases),
            },
            headers=headers,
        )
    )
    segment = seeded["segment"]
    current = client.get(f"/admin/v1/segments/{segment['id']}", headers=headers)
    patched = client.patch(
        f"/admin/v1/segments/{segment['id']}",
        json={"eval_set": "code-evals"},
        headers={**headers, "If-Match": current.headers["ETag"]},
    )
    assert patched.status_code == 200, patched.text
    reach, length = 1.0, 1.0
    for r in rates:
        reach *= r
        length += reach
    evaluation = created(
        client.post(
            "/admin/v1/evaluations",
            json={
                "pair_version_id": seeded["version"]["id"],
                "eval_set_id": eval_set["id"],
                "case_keys": [c["case_key"] for c in eval_set["cases"]],
                "drafts": 500,
                "position_acceptance": list(rates),
                "mean_acceptance_length": length,
                "cost_ratio": 0.1,
                "expected_speedup": {"3": length / 1.3},
                "draft_perplexity": 12.5,
                "training_set": "tiny-corpus-v1",
            },
            headers=headers,
        )
    )
    return {"eval_set": eval_set, "evaluation": evaluation}


class Waiver(TypedDict):
    waive: list[str]
    reason: str


WAIVE_ALL: Waiver = {
    "waive": ["offline_evaluation", "shadow"],
    "reason": "test: straight to canary",
}


def sdk_http(client: TestClient) -> httpx.Client:
    """`client` as the httpx.Client that AdminClient takes, to drive the app in-process.
    Starlette's TestClient subclasses httpx2.Client: httpx.Client's API under another
    class, so the types disagree where the calls do not."""
    return cast(httpx.Client, client)
