"""Speculating vs baseline pool on the bundled tiny pair: does speculation pay here?

    python -m bench.engine_bench [--max-tokens 64] [--rounds 2] [--json out.json]

Starts three real vLLM servers on the CPU, one at a time on the same core
(baseline = target alone; draft alone, to measure the draft/target cost ratio
c; spec = target + draft, k=3, probabilistic drafting), and for every cell
(concurrency 1/4/16 x temperature 0/1 x code/prose prompts) runs closed-loop
streaming clients against the baseline and the spec server and reports:

- output tokens/s (all completion tokens / cell wall time) and mean TPOT
  ((last token time - first token time) / (tokens - 1), per request);
- mean acceptance length tau = 1 + accepted/drafts and per-position acceptance
  (accepted at position i / drafts), from the spec server's /metrics deltas;
- the speedup the closed form predicts, (1-a^(k+1)) / ((1-a)(1+k c)), with a
  solved from the measured tau (tau = (1-a^(k+1))/(1-a)) and c = wall time per
  token of the draft alone / of the target alone at concurrency 1, beside the
  measured speedup
  (spec tokens/s / baseline tokens/s).
"""

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from engine.agent.metrics import parse_engine_metrics
from engine.pools.launcher import LaunchOptions, build_server_command
from engine.pools.local import tiny_baseline_pool, tiny_pair_dir, tiny_spec_pool
from engine.pools.probe_prompts import CODE_PROMPTS, PROSE_PROMPTS
from engine.pools.server import VllmServer
from specwire import PoolSpec, SpecCounters

K = 3
ENGINE_CORE = 0
ENGINE_ARGS: dict[str, object] = {"max-model-len": 512, "max-num-seqs": 32}


@dataclass
class CellResult:
    pool: str
    concurrency: int
    temperature: float
    domain: str
    requests: int
    tokens: int
    wall_s: float
    tokens_per_s: float
    tpot_ms: float
    ttft_ms: float
    tau: float | None = None
    per_position: list[float] | None = None


async def one_request(
    http: httpx.AsyncClient, url: str, prompt: str, temperature: float, max_tokens: int
) -> tuple[int, float, float]:
    """(completion tokens, TTFT s, TPOT s) of one streamed completion."""
    body = {
        "model": "tiny",
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    first = last = None
    tokens = 0
    async with http.stream("POST", f"{url}/v1/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                now = time.perf_counter()
                first = first if first is not None else now
                last = now
            if chunk.get("usage"):
                tokens = int(chunk["usage"]["completion_tokens"])
    assert first is not None and last is not None and tokens > 1
    return tokens, first - start, (last - first) / (tokens - 1)


async def run_cell(
    url: str,
    prompts: tuple[str, ...],
    concurrency: int,
    temperature: float,
    rounds: int,
    max_tokens: int,
) -> tuple[int, int, float, float, float]:
    """Closed loop: `concurrency` clients, each sending `rounds` requests back to back."""
    results: list[tuple[int, float, float]] = []

    async def client(index: int) -> None:
        for r in range(rounds):
            prompt = prompts[(index * rounds + r) % len(prompts)]
            results.append(await one_request(http, url, prompt, temperature, max_tokens))

    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=600, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(concurrency)))
        wall = time.perf_counter() - start
    tokens = sum(r[0] for r in results)
    ttft = statistics.mean(r[1] for r in results)
    tpot = statistics.mean(r[2] for r in results)
    return len(results), tokens, wall, ttft, tpot


def spec_counters(url: str) -> SpecCounters:
    spec = parse_engine_metrics(httpx.get(f"{url}/metrics", timeout=30).text).spec
    assert spec is not None, f"{url} is not speculating"
    return spec


def acceptance(before: SpecCounters, after: SpecCounters) -> tuple[float, list[float]]:
    drafts = after.num_drafts - before.num_drafts
    accepted = after.num_accepted_tokens - before.num_accepted_tokens
    per_pos = [
        (a - b) / drafts
        for a, b in zip(after.accepted_per_position, before.accepted_per_position, strict=True)
    ]
    return 1 + accepted / drafts, per_pos


def alpha_from_tau(tau: float, k: int = K) -> float:
    """Solve tau = (1 - a^(k+1)) / (1 - a) = 1 + a + ... + a^k for a in [0, 1]."""
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if sum(mid**i for i in range(k + 1)) < tau:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def predicted_speedup(alpha: float, c: float, k: int = K) -> float:
    if alpha >= 1.0:
        return (k + 1) / (1 + k * c)
    return (1 - alpha ** (k + 1)) / ((1 - alpha) * (1 + k * c))


def start_server(name: str, pool: PoolSpec, log_dir: Path, port: int) -> VllmServer:
    # NOTE: one server at a time, each on core 0: an idle vLLM server beside the
    # measured one still costs CPU (with a spec and a draft server idling on the
    # same core, the baseline's TTFT was 4-20x a lone baseline's), which biased
    # every ratio towards speculation.
    # The launcher confines the whole server to core 0; the clients keep off it.
    server = VllmServer(
        build_server_command(pool, port, LaunchOptions(cpu_cores=str(ENGINE_CORE))),
        log_dir / f"{name}.log",
    )
    server.start()
    try:
        took = server.wait_ready(600)
    except BaseException:
        server.stop()
        raise
    print(f"{name}: serving on {server.base_url} after {took:.0f}s", flush=True)
    return server


def markdown_table(cells: list[CellResult], c: float) -> str:
    by_key = {(r.pool, r.concurrency, r.temperature, r.domain): r for r in cells}
    head = (
        "| conc | T | prompts | base tok/s | spec tok/s | base TPOT ms | spec TPOT ms "
        "| tau | accept/pos | alpha | predicted | measured |\n"
        "|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|\n"
    )
    rows = []
    for r in cells:
        if r.pool != "spec":
            continue
        b = by_key[("baseline", r.concurrency, r.temperature, r.domain)]
        assert r.tau is not None and r.per_position is not None
        alpha = alpha_from_tau(r.tau)
        rows.append(
            f"| {r.concurrency} | {r.temperature:g} | {r.domain} | {b.tokens_per_s:.1f} "
            f"| {r.tokens_per_s:.1f} | {b.tpot_ms:.1f} | {r.tpot_ms:.1f} | {r.tau:.2f} "
            f"| {'/'.join(f'{p:.2f}' for p in r.per_position)} | {alpha:.2f} "
            f"| {predicted_speedup(alpha, c):.2f}x | {r.tokens_per_s / b.tokens_per_s:.2f}x |"
        )
    return head + "\n".join(rows) + "\n"


async def measure_pool(
    args: argparse.Namespace, name: str, url: str, cells: list[CellResult]
) -> float:
    """Warm `url` up, run every cell against it; returns its seconds per token alone."""
    domains = {"code": CODE_PROMPTS, "prose": PROSE_PROMPTS}
    # warm-up: first requests pay one-off allocation costs
    await run_cell(url, CODE_PROMPTS, 2, 0.0, 1, 16)
    # NOTE: wall time per token, not TPOT: the baseline server often delivers a
    # whole stream in one burst at its end (see bench/RESULTS.md), which makes its
    # TPOT read near zero while the tokens still took their time to make.
    _, tokens, wall, _, _ = await run_cell(url, CODE_PROMPTS, 1, 0.0, 4, args.max_tokens)
    per_token_alone = wall / tokens
    if name == "draft":
        return per_token_alone  # only its cost is needed
    for concurrency in args.concurrency:
        for temperature in args.temperatures:
            for domain, prompts in domains.items():
                before = spec_counters(url) if name == "spec" else None
                n, tokens, wall, ttft, tpot = await run_cell(
                    url, prompts, concurrency, temperature, args.rounds, args.max_tokens
                )
                cell = CellResult(
                    name,
                    concurrency,
                    temperature,
                    domain,
                    n,
                    tokens,
                    wall,
                    tokens / wall,
                    tpot * 1000,
                    ttft * 1000,
                )
                if before is not None:
                    cell.tau, cell.per_position = acceptance(before, spec_counters(url))
                cells.append(cell)
                print(
                    f"{name:8s} conc={concurrency:2d} T={temperature:g} {domain:5s} "
                    f"{cell.tokens_per_s:7.1f} tok/s  TPOT {cell.tpot_ms:6.1f} ms"
                    f"  TTFT {cell.ttft_ms:7.1f} ms"
                    + (f"  tau {cell.tau:.2f}" if cell.tau else ""),
                    flush=True,
                )
    return per_token_alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair-dir", type=Path, default=None)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2, help="Requests per client per cell.")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--port", type=int, default=18300)
    parser.add_argument("--json", type=Path, default=None, help="Write all numbers here.")
    args = parser.parse_args()

    root = args.pair_dir or tiny_pair_dir()
    others = set(os.sched_getaffinity(0)) - {ENGINE_CORE}
    if others:
        os.sched_setaffinity(0, others)
    pools = {
        "baseline": tiny_baseline_pool(root, ENGINE_ARGS),
        "draft": tiny_baseline_pool(root, ENGINE_ARGS, model="draft"),
        "spec": tiny_spec_pool(root, ENGINE_ARGS, num_speculative_tokens=K),
    }
    cells: list[CellResult] = []
    per_token_alone: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="engine-bench-") as logs:
        for name, pool in pools.items():
            server = start_server(name, pool, Path(logs), args.port)
            try:
                per_token_alone[name] = asyncio.run(
                    measure_pool(args, name, server.base_url, cells)
                )
            finally:
                server.stop()
    # c: per-token cost of the draft relative to the target, both alone, concurrency 1
    c = per_token_alone["draft"] / per_token_alone["baseline"]
    print(f"c = time per token (draft alone) / (target alone) = {c:.3f}", flush=True)
    result = {
        "c": c,
        "ms_per_token_alone": {k: v * 1000 for k, v in per_token_alone.items()},
        "k": K,
        "cells": [asdict(cell) for cell in cells],
        "table": markdown_table(cells, c),
    }
    print()
    print(result["table"])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
