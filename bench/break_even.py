"""Open-loop break-even measurement: where does speculation pay, by load and segment?

Arrivals are Poisson at a fixed rate, independent of how fast the server answers
(open loop: a slow arm builds a queue instead of slowing the arrivals down). For
each arm (the baseline, draft-model speculation at several depths, n-gram), each
segment (prompts x temperature) and each rate, one cell measures the client's
TTFT and TPOT (p50/p99), end-to-end time per output token, output tokens/s,
target passes per emitted token, the share of decode steps that drafted, engine
CPU time per output token and KV-cache use per running sequence. Speedup = the
baseline's mean end-to-end time per token / the arm's, at the same segment and
rate.

`bench.break_even_cli` starts the servers and writes the report; this module
measures servers it is given, so a test can run it against the session's.
"""

import asyncio
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

from bench.streams import StreamTrace, stream_once

DRAFTS = "vllm:spec_decode_num_drafts_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
KV_CACHE = "vllm:kv_cache_usage_perc"
RUNNING = "vllm:num_requests_running"


@dataclass(frozen=True)
class Segment:
    name: str
    prompts: tuple[str, ...]
    temperature: float


@dataclass(frozen=True)
class ArmServer:
    """A serving arm: its URL, model name, depth (0 = baseline) and its process id."""

    arm: str
    url: str
    model: str
    k: int
    pid: int | None


@dataclass
class Cell:
    arm: str
    k: int
    segment: str
    temperature: float
    rate: float
    duration_s: float
    traces: list[StreamTrace] = field(default_factory=list)
    e2e_s: list[float] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0
    drafts: float = 0.0
    accepted: float = 0.0
    cpu_s: float = 0.0
    kv_per_seq: float | None = None

    @property
    def tokens(self) -> int:
        return sum(t.completion_tokens for t in self.traces)

    @property
    def tau(self) -> float | None:
        """Mean acceptance length: 1 + accepted / drafts (None for the baseline)."""
        return 1 + self.accepted / self.drafts if self.drafts else None

    @property
    def target_passes(self) -> float:
        """Prefills plus decode steps. A decode step emits one token plus the drafts it
        accepted, so steps >= tokens - requests - accepted (the engine's accepted count
        can include drafts past max_tokens, cut from the output), and every drafting
        step is one: steps >= drafts, exact where every step drafts (a draft model).
        Not 1 / tau: an n-gram proposer drafts only where it finds a match, and tau
        counts only the steps that drafted."""
        requests = len(self.traces)
        return requests + max(self.drafts, self.tokens - requests - self.accepted)

    @property
    def target_passes_per_token(self) -> float:
        return self.target_passes / self.tokens if self.tokens else 1.0

    @property
    def drafted_share(self) -> float | None:
        """Decode steps that carried a draft / all decode steps (None for the baseline)."""
        steps = self.target_passes - len(self.traces)
        return self.drafts / steps if self.k and steps > 0 else None

    def e2e_per_token_s(self) -> float | None:
        values = [
            e / t.completion_tokens
            for e, t in zip(self.e2e_s, self.traces, strict=True)
            if t.completion_tokens
        ]
        return statistics.mean(values) if values else None

    def summary(self) -> dict[str, Any]:
        ttft = sorted(t.ttft_s * 1000 for t in self.traces)
        tpot = sorted(t.tpot_s * 1000 for t in self.traces if t.tpot_s is not None)
        e2e = self.e2e_per_token_s()
        return {
            "arm": self.arm,
            "k": self.k,
            "segment": self.segment,
            "temperature": self.temperature,
            "rate": self.rate,
            "requests": len(self.traces),
            "errors": self.errors,
            "ttft_p50_ms": percentile(ttft, 50),
            "ttft_p99_ms": percentile(ttft, 99),
            "tpot_p50_ms": percentile(tpot, 50),
            "tpot_p99_ms": percentile(tpot, 99),
            "e2e_per_token_ms": e2e * 1000 if e2e is not None else None,
            "tokens_per_s": self.tokens / self.wall_s if self.wall_s else None,
            "target_passes_per_token": self.target_passes_per_token,
            "tau": self.tau,
            "drafted_share": self.drafted_share,
            "cpu_ms_per_token": self.cpu_s * 1000 / self.tokens if self.tokens else None,
            "kv_per_seq": self.kv_per_seq,
        }


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank q-th percentile of sorted `values`; None when empty."""
    if not values:
        return None
    index = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return values[index]


def _counters(text: str) -> dict[str, float]:
    out = {DRAFTS: 0.0, ACCEPTED: 0.0, KV_CACHE: 0.0, RUNNING: 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in out:
                out[sample.name] += sample.value
    return out


def tree_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a server and every process it started."""
    if pid is None:
        return 0.0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


async def run_cell(
    server: ArmServer,
    segment: Segment,
    rate: float,
    duration_s: float,
    max_tokens: int,
    seed: int = 0,
) -> Cell:
    """Poisson arrivals at `rate`/s for `duration_s`; waits for every request to finish."""
    cell = Cell(server.arm, server.k, segment.name, segment.temperature, rate, duration_s)
    rng = random.Random(seed)
    kv_samples: list[float] = []
    limits = httpx.Limits(max_connections=512)
    async with httpx.AsyncClient(timeout=600, limits=limits) as http:
        before = _counters((await http.get(f"{server.url}/metrics")).text)
        cpu_before = tree_cpu_s(server.pid)
        start = time.perf_counter()

        async def one(prompt: str) -> None:
            sent = time.perf_counter()
            try:
                trace = await stream_once(
                    http, server.url, server.model, prompt, segment.temperature, max_tokens
                )
            except (httpx.HTTPError, RuntimeError):
                cell.errors += 1
                return
            cell.traces.append(trace)
            cell.e2e_s.append(time.perf_counter() - sent)

        async def sample_kv() -> None:
            while True:
                await asyncio.sleep(0.5)
                c = _counters((await http.get(f"{server.url}/metrics")).text)
                if c[RUNNING] > 0:
                    kv_samples.append(c[KV_CACHE] / c[RUNNING])

        sampler = asyncio.create_task(sample_kv())
        tasks: list[asyncio.Task[None]] = []
        at = rng.expovariate(rate)
        index = 0
        while at < duration_s:
            delay = start + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            prompt = segment.prompts[index % len(segment.prompts)]
            tasks.append(asyncio.create_task(one(prompt)))
            index += 1
            at += rng.expovariate(rate)
        await asyncio.gather(*tasks)
        cell.wall_s = time.perf_counter() - start
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
        after = _counters((await http.get(f"{server.url}/metrics")).text)
    cell.cpu_s = tree_cpu_s(server.pid) - cpu_before
    cell.drafts = after[DRAFTS] - before[DRAFTS]
    cell.accepted = after[ACCEPTED] - before[ACCEPTED]
    cell.kv_per_seq = statistics.mean(kv_samples) if kv_samples else None
    return cell


def alpha_from_tau(tau: float, k: int) -> float:
    """Solve tau = 1 + a + ... + a^k for a in [0, 1]."""
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if sum(mid**i for i in range(k + 1)) < tau:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def predicted_speedup(tau: float, k: int, c: float) -> float:
    """Closed form at low load: tau target tokens per (1 target pass + k draft passes)."""
    return tau / (1 + k * c)


def speedups(cells: Sequence[Cell]) -> dict[tuple[str, str, float], float]:
    """(arm, segment, rate) -> baseline e2e per token / arm e2e per token."""
    base = {
        (c.segment, c.rate): c.e2e_per_token_s() for c in cells if c.k == 0 and c.arm == "baseline"
    }
    out: dict[tuple[str, str, float], float] = {}
    for c in cells:
        b = base.get((c.segment, c.rate))
        mine = c.e2e_per_token_s()
        if c.arm != "baseline" and b and mine:
            out[(c.arm, c.segment, c.rate)] = b / mine
    return out
