"""Per-token arrival times of streamed completions, against the engine's own clock.

A stream is *fair* when the client sees tokens as the engine makes them: the
client's time per output token equals the engine's (vLLM stamps every output
with the engine core's clock and exports `vllm:request_time_per_output_token_seconds`,
the same (last - first) / (n - 1) per request, from those stamps). A bursty
stream shows a client TPOT far *below* the engine's (many tokens arrive at
once, late) and a long largest gap between chunks.

The functions here take a server URL; `bench.streams_cli` starts the servers.
"""

import asyncio
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

ENGINE_TPOT = "vllm:request_time_per_output_token_seconds"
ENGINE_TTFT = "vllm:time_to_first_token_seconds"


@dataclass
class StreamTrace:
    """One streamed completion: when each chunk arrived and how many tokens it held."""

    ttft_s: float
    arrivals_s: list[float]  # since the request was sent, one per chunk with tokens
    tokens: list[int]  # completion tokens in each of those chunks

    @property
    def completion_tokens(self) -> int:
        return sum(self.tokens)

    @property
    def tpot_s(self) -> float | None:
        n = self.completion_tokens
        if n < 2:
            return None
        return (self.arrivals_s[-1] - self.arrivals_s[0]) / (n - 1)

    @property
    def largest_gap_s(self) -> float:
        gaps = [b - a for a, b in zip(self.arrivals_s, self.arrivals_s[1:], strict=False)]
        return max(gaps, default=0.0)


async def stream_once(
    http: httpx.AsyncClient,
    url: str,
    model: str,
    prompt: str,
    temperature: float,
    max_tokens: int,
) -> StreamTrace:
    """Send one streaming completion and stamp every chunk that carries tokens."""
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "ignore_eos": True,
        "stream": True,
        # NOTE: cumulative usage in every chunk: a speculating engine may emit
        # several tokens in one chunk, and their count is what TPOT divides by.
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    start = time.perf_counter()
    arrivals: list[float] = []
    tokens: list[int] = []
    seen = 0
    async with http.stream("POST", f"{url}/v1/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            now = time.perf_counter() - start
            chunk = json.loads(line[6:])
            usage = chunk.get("usage") or {}
            total = int(usage.get("completion_tokens", seen))
            if total > seen:
                arrivals.append(now)
                tokens.append(total - seen)
                seen = total
    if not arrivals:
        raise RuntimeError(f"{url}: a stream without tokens")
    return StreamTrace(ttft_s=arrivals[0], arrivals_s=arrivals, tokens=tokens)


@dataclass(frozen=True)
class HistogramTotals:
    sum: float
    count: float

    def minus(self, other: "HistogramTotals") -> "HistogramTotals":
        return HistogramTotals(self.sum - other.sum, self.count - other.count)

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count else None


def histogram_totals(metrics_text: str, name: str) -> HistogramTotals:
    """Sum and count of a vLLM histogram over every engine label."""
    total, count = 0.0, 0.0
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == f"{name}_sum":
                total += sample.value
            elif sample.name == f"{name}_count":
                count += sample.value
    return HistogramTotals(total, count)


async def engine_histograms(http: httpx.AsyncClient, url: str) -> dict[str, HistogramTotals]:
    text = (await http.get(f"{url}/metrics")).text
    return {name: histogram_totals(text, name) for name in (ENGINE_TPOT, ENGINE_TTFT)}


@dataclass
class CellStreams:
    """Closed-loop cell: `concurrency` clients, each sending requests back to back."""

    server: str
    concurrency: int
    temperature: float
    traces: list[StreamTrace] = field(default_factory=list)
    engine_tpot_s: float | None = None  # mean over the cell's requests, engine clock
    engine_ttft_s: float | None = None

    @property
    def client_tpot_s(self) -> float:
        values = [t.tpot_s for t in self.traces if t.tpot_s is not None]
        return statistics.mean(values)

    @property
    def client_ttft_s(self) -> float:
        return statistics.mean(t.ttft_s for t in self.traces)

    @property
    def tpot_ratio(self) -> float | None:
        """Client TPOT / engine TPOT: 1.0 for a fair stream, well below 1 for bursts."""
        if not self.engine_tpot_s:
            return None
        return self.client_tpot_s / self.engine_tpot_s

    @property
    def largest_gap_p50_s(self) -> float:
        return statistics.median(t.largest_gap_s for t in self.traces)

    def summary(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "concurrency": self.concurrency,
            "temperature": self.temperature,
            "requests": len(self.traces),
            "client_tpot_ms": self.client_tpot_s * 1000,
            "engine_tpot_ms": (self.engine_tpot_s or 0.0) * 1000,
            "tpot_ratio": self.tpot_ratio,
            "client_ttft_ms": self.client_ttft_s * 1000,
            "engine_ttft_ms": (self.engine_ttft_s or 0.0) * 1000,
            "largest_gap_p50_ms": self.largest_gap_p50_s * 1000,
        }

    def to_json(self) -> dict[str, Any]:
        return {**self.summary(), "traces": [asdict(t) for t in self.traces]}


async def measure_streams(
    server: str,
    url: str,
    model: str,
    prompts: Sequence[str],
    concurrency: int,
    temperature: float,
    requests_per_client: int,
    max_tokens: int,
) -> CellStreams:
    """Run one closed-loop cell and read the engine's own TPOT/TTFT over the same requests."""
    cell = CellStreams(server, concurrency, temperature)
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=600, limits=limits) as http:
        before = await engine_histograms(http, url)

        async def client(index: int) -> None:
            for r in range(requests_per_client):
                prompt = prompts[(index * requests_per_client + r) % len(prompts)]
                trace = await stream_once(http, url, model, prompt, temperature, max_tokens)
                cell.traces.append(trace)

        await asyncio.gather(*(client(i) for i in range(concurrency)))
        after = await engine_histograms(http, url)
    cell.engine_tpot_s = after[ENGINE_TPOT].minus(before[ENGINE_TPOT]).mean
    cell.engine_ttft_s = after[ENGINE_TTFT].minus(before[ENGINE_TTFT]).mean
    return cell
