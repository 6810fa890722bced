"""Simulated requests of one arm in one window: what a gateway would have recorded.

Latency model (per request): decode time per token grows linearly with the
worker's load at dispatch, t(load) = tpot_ms (1 + load_slope load), times a
log-normal per-request factor; TTFT the same with its own slope and spread;
output length uniform. The load at dispatch is Poisson around the per-worker
concurrency rho, the fixed point of Little's law rho = (arm rate / workers) *
E[end-to-end latency at rho]. Bursty delivery: a share of streams arrives in
one burst at the end, so the client reads TPOT near 0 and TTFT absorbs the
wait (end-to-end unchanged).

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


def mean_e2e_s(model: ArmModel, traffic: TrafficModel, load: float) -> float:
    tokens = (traffic.min_tokens + traffic.max_tokens) / 2
    tpot = model.tpot_ms * (1 + model.load_slope * load) * math.exp(traffic.tpot_sigma**2 / 2)
    ttft = model.ttft_ms * (1 + model.ttft_load_slope * load) * math.exp(traffic.ttft_sigma**2 / 2)
    return (ttft + tokens * tpot) / 1000.0


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


def sample_arm(
    rng: np.random.Generator,
    model: ArmModel,
    traffic: TrafficModel,
    n: int,
    load: float,
) -> ArmRequests:
    """n requests dispatched at Poisson(load) other requests in flight on their worker."""
    k = traffic.k
    gateway_load = rng.poisson(load, n).astype(np.int64)  # [n]
    tokens = rng.integers(traffic.min_tokens, traffic.max_tokens + 1, n)  # [n]
    tpot = (
        model.tpot_ms
        * (1 + model.load_slope * gateway_load)
        * rng.lognormal(0.0, traffic.tpot_sigma, n)
    )  # [n]
    ttft = (
        model.ttft_ms
        * (1 + model.ttft_load_slope * gateway_load)
        * rng.lognormal(0.0, traffic.ttft_sigma, n)
    )  # [n]
    e2e = ttft + tpot * (tokens - 1)  # [n]
    burst = rng.random(n) < model.burst_probability  # [n]
    # NOTE: a burst: every token arrives together at the end, so TPOT reads ~0.05 of the
    # real decode time and TTFT takes the rest of the end-to-end time.
    client_tpot = np.where(burst, tpot * 0.05, tpot)
    client_ttft = np.where(burst, e2e - client_tpot * (tokens - 1), ttft)
    errors = rng.random(n) < model.error_rate
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
    # What the worker's last heartbeat said: the other requests it was running / queueing.
    running = np.minimum(gateway_load, traffic.max_num_seqs)
    waiting = np.maximum(gateway_load - traffic.max_num_seqs, 0)
    return ArmRequests(
        errors=errors,
        tokens=tokens.astype(np.int64),
        ttft_ms=client_ttft,
        tpot_ms=client_tpot,
        e2e_ms=e2e,
        gateway_load=gateway_load,
        engine_running=running.astype(np.int64),
        engine_waiting=waiting.astype(np.int64),
        drafts=drafts,
        accepted_per_position=per_position,
    )
