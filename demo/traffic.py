"""Open-loop Poisson load through the gateway with the `openai` client.

Arrivals follow a Poisson process per segment, independent of how fast the
server answers (open loop): a slow arm does not slow the arrivals down, which
is what a closed-loop client would hide. Each segment draws its arrival times,
prompts and users from its own generator seeded by (seed, segment), whatever
was shed: the same seed gives every run the same schedule, so configurations
can be compared on identical traffic (bench.policy). Concurrency is still bounded per
segment; an arrival that finds the bound reached is shed and counted, never
queued, so the offered load stays the one asked for.

Each request streams, so the client sees time to first token and time per
output token itself; the arm comes from the gateway's `x-specroute-decision`
header. The `user` field spreads requests over sticky cohorts. Requests carry no
sampling seed: the gateway sends a seeded request at temperature > 0 to the baseline
arm (`seed_not_reproducible`), which would leave a sampled segment's canary without
spec traffic.
"""

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import openai

try:  # recent openai releases are built on httpx2, older ones on httpx
    import httpx2 as httpx_lib
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpx as httpx_lib  # type: ignore[no-redef]

from demo.plan import SegmentPlan

TASK_HEADER = "x-specroute-task"
DECISION_HEADER = "x-specroute-decision"


@dataclass(frozen=True)
class RequestResult:
    segment: str
    started_s: float  # since the traffic started
    arm: str | None  # spec | baseline, from the decision header; None when not routed
    reason: str | None
    status: int  # HTTP status; 0 when no response came (connection failure)
    error: str | None
    completion_tokens: int
    ttft_s: float | None
    tpot_s: float | None  # (e2e - ttft) / (tokens - 1), requests with 2+ tokens
    e2e_s: float

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None


def parse_decision(header: str | None) -> dict[str, str]:
    """'arm=spec; pair=tiny-v1; k=3; reason=canary' -> {'arm': 'spec', ...}."""
    if not header:
        return {}
    fields = (part.strip().partition("=") for part in header.split(";"))
    return {key: value for key, _, value in fields if key}


@dataclass
class SegmentCounters:
    sent: int = 0
    shed: int = 0
    in_flight: int = 0


class TrafficGenerator:
    """Drives every segment's Poisson arrivals for `duration_s` and keeps each result."""

    def __init__(
        self,
        gateway_url: str,
        tenant_keys: dict[str, str],
        segments: Sequence[SegmentPlan],
        *,
        model: str,
        seed: int = 0,
        rate_scale: float = 1.0,
        request_timeout_s: float = 180.0,
        on_result: Callable[[RequestResult], None] | None = None,
        headers: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """`headers`: extra request headers per segment name (e.g. the speculation
        override a static configuration sends)."""
        self.segments = list(segments)
        self.model = model
        self.rate_scale = rate_scale
        self.on_result = on_result
        self.results: list[RequestResult] = []
        self.counters = {s.name: SegmentCounters() for s in self.segments}
        self._rngs = {s.name: random.Random(f"{seed}/{s.name}") for s in self.segments}
        self._headers = {name: dict(h) for name, h in (headers or {}).items()}
        self._clients = {
            tenant: openai.AsyncOpenAI(
                api_key=key,
                base_url=gateway_url.rstrip("/") + "/v1",
                timeout=request_timeout_s,
                max_retries=0,  # a retry would hide the failure the demo should count
                # NOTE: idle connections expire before uvicorn's 5 s keep-alive does, so a
                # request never races the server closing the connection it reuses.
                http_client=openai.DefaultAsyncHttpxClient(
                    limits=httpx_lib.Limits(keepalive_expiry=2.0), timeout=request_timeout_s
                ),
            )
            for tenant, key in tenant_keys.items()
        }
        self._tasks: set[asyncio.Task[None]] = set()
        self._t0 = time.monotonic()

    async def run(self, duration_s: float, drain_s: float = 120.0) -> list[RequestResult]:
        """Send arrivals for `duration_s`, then wait up to `drain_s` for in-flight requests."""
        self._t0 = time.monotonic()
        await asyncio.gather(*(self._arrivals(s, duration_s) for s in self.segments))
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=drain_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for client in self._clients.values():
            await client.close()
        return self.results

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    async def _arrivals(self, seg: SegmentPlan, duration_s: float) -> None:
        rate = seg.rate_per_s * self.rate_scale
        if rate <= 0:
            return
        counters = self.counters[seg.name]
        rng = self._rngs[seg.name]
        next_at = rng.expovariate(rate)
        while next_at < duration_s:
            await asyncio.sleep(max(0.0, next_at - self.elapsed()))
            # NOTE: drawn before the shed check, so shedding never shifts the schedule.
            prompt = seg.prompts[rng.randrange(len(seg.prompts))]
            user = f"{seg.name}-user-{rng.randrange(seg.users)}"
            if counters.in_flight >= seg.max_in_flight:
                counters.shed += 1
            else:
                counters.sent += 1
                counters.in_flight += 1
                task = asyncio.create_task(self._one(seg, prompt, user))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            next_at += rng.expovariate(rate)

    async def _one(self, seg: SegmentPlan, prompt: str, user: str) -> None:
        started = time.monotonic()
        started_s = started - self._t0
        decision: dict[str, str] = {}
        status, error, tokens = 0, None, 0
        first: float | None = None
        try:
            raw = await self._clients[seg.tenant].completions.with_raw_response.create(
                model=seg.adapter or self.model,
                prompt=prompt,
                max_tokens=seg.max_tokens,
                temperature=seg.temperature,
                user=user,
                stream=True,
                stream_options={"include_usage": True},
                extra_headers={TASK_HEADER: seg.task, **self._headers.get(seg.name, {})},
            )
            decision = parse_decision(raw.headers.get(DECISION_HEADER))
            status = raw.status_code
            stream = raw.parse()
            async for chunk in stream:
                if first is None and chunk.choices and chunk.choices[0].text:
                    first = time.monotonic()
                if chunk.usage is not None:
                    tokens = chunk.usage.completion_tokens
        except openai.APIStatusError as exc:
            status = exc.status_code
            error = _error_code(exc)
            decision = parse_decision(exc.response.headers.get(DECISION_HEADER))
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            error = type(exc).__name__
        finally:
            self.counters[seg.name].in_flight -= 1
        end = time.monotonic()
        ttft = first - started if first is not None else None
        tpot = (end - first) / (tokens - 1) if first is not None and tokens > 1 else None
        result = RequestResult(
            segment=seg.name,
            started_s=started_s,
            arm=decision.get("arm"),
            reason=decision.get("reason"),
            status=status,
            error=error,
            completion_tokens=tokens,
            ttft_s=ttft,
            tpot_s=tpot,
            e2e_s=end - started,
        )
        self.results.append(result)
        if self.on_result is not None:
            self.on_result(result)


def _error_code(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        code = body.get("code") or (body.get("error") or {}).get("code")
        if code:
            return str(code)
    return f"http_{exc.status_code}"
