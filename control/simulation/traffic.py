"""Simulated requests of one arm: what a gateway would have recorded.

Latency model (per request): decode time per token grows linearly with the
worker's load at dispatch, t(load) = tpot_ms (1 + load_slope load), times a
log-normal per-request factor and, with `stall_probability`, a classic
Pareto(`stall_alpha`) stall factor; TTFT the same with its own slope and spread;
output length uniform. `draw_requests` draws everything that does not depend on
the load (vectorised), `at_load` completes the requests once each one's load at
dispatch is known: from the gateway's balancer (bench/decisions/dispatch.py), or, in
`sample_arm` (random dispatch), Poisson around the per-worker concurrency rho,
the fixed point of Little's law rho = (arm rate / workers) * E[end-to-end
latency at rho]. Bursty delivery: a share of streams arrives in one burst at the
end, so the client reads TPOT near 0 and TTFT absorbs the wait (end-to-end
unchanged).

Acceptance: request r draws its own rate a_r ~ Beta(kappa alpha, kappa (1 -
alpha)) (easy and hard prompts: the positions of one request are correlated),
then each of its drafts accepts position i with probability a_r given that
positions < i were accepted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# NOTE: beyond this many concurrent requests per worker the queue is taken as
# diverging (the arm's arrival rate exceeds what the worker serves).
MAX_LOAD = 200.0


@dataclass(frozen=True)
class ArmModel:
    tpot_ms: float  # decode time per token on an idle worker
    load_slope: float  # relative slowdown per request already in flight
    ttft_ms: float = 120.0
    ttft_load_slope: float = 0.05
    error_rate: float = 0.01
    acceptance: float | None = None  # None: a baseline arm (no drafts)
    burst_probability: float = 0.0
    stall_probability: float = 0.0  # a request's decode stalls by a Pareto factor
    stall_alpha: float = 1.5


@dataclass(frozen=True)
class TrafficModel:
    requests_per_window: float = 2000.0
    window_seconds: int = 10
    min_tokens: int = 16
    max_tokens: int = 256
    tpot_sigma: float = 0.15
    ttft_sigma: float = 0.3
    acceptance_concentration: float = 8.0
    k: int = 3
    spec_workers: int = 40
    baseline_workers: int = 40
    max_num_seqs: int = 16  # running at most; the rest of the load waits in the engine


@dataclass(frozen=True)
class ArmRequests:
    """One window of one arm: arrays over its n requests."""

    errors: NDArray[np.bool_]  # [n]
    tokens: NDArray[np.int64]  # [n]
    ttft_ms: NDArray[np.float64]  # [n]
    tpot_ms: NDArray[np.float64]  # [n] as the client reads it
    e2e_ms: NDArray[np.float64]  # [n]
    gateway_load: NDArray[np.int64]  # [n]
    engine_running: NDArray[np.int64]  # [n]
    engine_waiting: NDArray[np.int64]  # [n]
    drafts: NDArray[np.int64]  # [n]
    accepted_per_position: NDArray[np.int64]  # [n, k]; zeros on the baseline arm

    @property
    def n(self) -> int:
        return int(self.tokens.shape[0])


def _stall_mean(model: ArmModel) -> float:
    if model.stall_probability <= 0:
        return 1.0
    # E[1 + Lomax(alpha)] = 1 + 1 / (alpha - 1); infinite at alpha <= 1.
    mean = 1.0 + 1.0 / (model.stall_alpha - 1.0) if model.stall_alpha > 1 else math.inf
    return 1.0 + model.stall_probability * (mean - 1.0)


def mean_e2e_s(model: ArmModel, traffic: TrafficModel, load: float) -> float:
    """E[end-to-end time] of a request dispatched at `load` (the model is linear in load)."""
    decode_tokens = (traffic.min_tokens + traffic.max_tokens) / 2 - 1
    tpot = model.tpot_ms * (1 + model.load_slope * load) * math.exp(traffic.tpot_sigma**2 / 2)
    ttft = model.ttft_ms * (1 + model.ttft_load_slope * load) * math.exp(traffic.ttft_sigma**2 / 2)
    return (ttft + decode_tokens * tpot * _stall_mean(model)) / 1000.0


def mean_e2e_per_token_ms(model: ArmModel, traffic: TrafficModel, load: float) -> float:
    """E[end-to-end time / tokens] at `load` (the latency guard's metric), exact over the
    uniform output length."""
    tokens = np.arange(traffic.min_tokens, traffic.max_tokens + 1, dtype=np.float64)
    tpot = model.tpot_ms * (1 + model.load_slope * load) * math.exp(traffic.tpot_sigma**2 / 2)
    ttft = model.ttft_ms * (1 + model.ttft_load_slope * load) * math.exp(traffic.ttft_sigma**2 / 2)
    per_token = (ttft + (tokens - 1) * tpot * _stall_mean(model)) / tokens
    return float(per_token.mean())


def per_worker_load(
    model: ArmModel, traffic: TrafficModel, rate_per_s: float, workers: int
) -> float:
    """rho = (rate / workers) * E[e2e(rho)] by fixed-point iteration; MAX_LOAD if it diverges."""
    per_worker = rate_per_s / max(workers, 1)
    rho = 0.0
    for _ in range(200):
        nxt = per_worker * mean_e2e_s(model, traffic, rho)
        if nxt >= MAX_LOAD:
            return MAX_LOAD
        if abs(nxt - rho) < 1e-6:
            return nxt
        rho = nxt
    return rho


@dataclass(frozen=True)
class Draws:
    """What one arm's n requests are before they are dispatched: everything that does
    not depend on the load they meet. Service time at load L is `base + slope * L`."""

    errors: NDArray[np.bool_]  # [n]
    tokens: NDArray[np.int64]  # [n]
    ttft_ms: NDArray[np.float64]  # [n] TTFT on an idle worker
    tpot_ms: NDArray[np.float64]  # [n] decode time per token on an idle worker
    burst: NDArray[np.bool_]  # [n]
    drafts: NDArray[np.int64]  # [n]
    accepted_per_position: NDArray[np.int64]  # [n, k]
    e2e_base_ms: NDArray[np.float64]  # [n] end-to-end time at load 0
    e2e_slope_ms: NDArray[np.float64]  # [n] added per request in flight at dispatch

    @property
    def n(self) -> int:
        return int(self.tokens.shape[0])


def draw_requests(
    rng: np.random.Generator, model: ArmModel, traffic: TrafficModel, n: int
) -> Draws:
    """n requests' own randomness, drawn vectorised (lengths, per-request speed factors,
    stalls, errors, bursts, acceptance)."""
    k = traffic.k
    tokens = rng.integers(traffic.min_tokens, traffic.max_tokens + 1, n).astype(np.int64)  # [n]
    tpot = model.tpot_ms * rng.lognormal(0.0, traffic.tpot_sigma, n)  # [n]
    if model.stall_probability > 0:
        # NOTE: a stall multiplies the whole decode by a classic Pareto factor (>= 1):
        # rare, unbounded variance at alpha <= 2, the heavy tail geometric means dislike.
        stalled = rng.random(n) < model.stall_probability
        tpot = np.where(stalled, tpot * (1.0 + rng.pareto(model.stall_alpha, n)), tpot)
    ttft = model.ttft_ms * rng.lognormal(0.0, traffic.ttft_sigma, n)  # [n]
    burst = rng.random(n) < model.burst_probability  # [n]
    errors = rng.random(n) < model.error_rate  # [n]
    drafts = np.zeros(n, np.int64)
    per_position = np.zeros((n, k), np.int64)
    if model.acceptance is not None and n > 0:
        kappa = traffic.acceptance_concentration
        rates = rng.beta(kappa * model.acceptance, kappa * (1 - model.acceptance), n)  # [n]
        tau = (1 - rates ** (k + 1)) / np.maximum(1 - rates, 1e-9)  # tokens per pass, [n]
        drafts = np.maximum(np.ceil(tokens / tau), 1).astype(np.int64)
        reaching = drafts
        for i in range(k):
            reaching = rng.binomial(reaching, rates)
            per_position[:, i] = reaching
    decode = tpot * (tokens - 1)  # [n]
    return Draws(
        errors=errors,
        tokens=tokens,
        ttft_ms=ttft,
        tpot_ms=tpot,
        burst=burst,
        drafts=drafts,
        accepted_per_position=per_position,
        e2e_base_ms=ttft + decode,
        e2e_slope_ms=ttft * model.ttft_load_slope + decode * model.load_slope,
    )


def at_load(
    model: ArmModel, traffic: TrafficModel, draws: Draws, load: NDArray[np.int64]
) -> ArmRequests:
    """The requests as the gateway records them, each dispatched with `load` other
    requests in flight on its worker."""
    assert load.shape == (draws.n,)
    tpot = draws.tpot_ms * (1 + model.load_slope * load)  # [n]
    ttft = draws.ttft_ms * (1 + model.ttft_load_slope * load)  # [n]
    tokens = draws.tokens
    e2e = np.asarray(ttft + tpot * (tokens - 1), np.float64)  # [n]
    # NOTE: a burst: every token arrives together at the end, so TPOT reads ~0.05 of the
    # real decode time and TTFT takes the rest of the end-to-end time.
    client_tpot = np.where(draws.burst, tpot * 0.05, tpot)
    client_ttft = np.where(draws.burst, e2e - client_tpot * (tokens - 1), ttft)
    # What the worker's engine was doing: the other requests it was running / queueing.
    running = np.minimum(load, traffic.max_num_seqs)
    waiting = np.maximum(load - traffic.max_num_seqs, 0)
    return ArmRequests(
        errors=draws.errors,
        tokens=tokens,
        ttft_ms=client_ttft,
        tpot_ms=client_tpot,
        e2e_ms=e2e,
        gateway_load=load.astype(np.int64),
        engine_running=running.astype(np.int64),
        engine_waiting=waiting.astype(np.int64),
        drafts=draws.drafts,
        accepted_per_position=draws.accepted_per_position,
    )


def sample_arm(
    rng: np.random.Generator,
    model: ArmModel,
    traffic: TrafficModel,
    n: int,
    load: float,
) -> ArmRequests:
    """Random dispatch: n requests sent at Poisson(load) other requests on their worker."""
    gateway_load = rng.poisson(load, n).astype(np.int64)  # [n]
    return at_load(model, traffic, draw_requests(rng, model, traffic, n), gateway_load)


def take(requests: ArmRequests, index: NDArray[np.int64]) -> ArmRequests:
    """The requests at `index` (e.g. those that ended in a window)."""
    return ArmRequests(**{f: getattr(requests, f)[index] for f in _FIELDS})


def concat(parts: list[ArmRequests]) -> ArmRequests:
    assert parts
    if len(parts) == 1:
        return parts[0]
    return ArmRequests(**{f: np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS})


_FIELDS = tuple(ArmRequests.__dataclass_fields__)
