"""Depth advice: the speculative length k with the best expected speedup.

For each k in 1..k_max, expected speedup = tau(k) / (1 + k c) (see
`acceptance.py`), where tau(k) = 1 + sum_{i=1..k} prod_{j<i} r_j comes from
the measured per-position conditional acceptance rates r_j and c is the
measured draft/target cost ratio. Positions deeper than the measured ones
(a pair version deployed with a shorter length) are extrapolated with the
pooled alpha and flagged in the table: that assumes acceptance stays at its
average beyond the measured depth, which usually overstates deep positions.

k = 0 (no speculation) has speedup 1 by definition; `speculation_pays` says
whether the best k beats it. Ties are broken towards the shorter k (less
draft work and memory for the same expected gain).

The cost ratio can also be backed out of a measured speedup s at length k:
c = (tau(k) / s - 1) / k.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from control.stats.acceptance import AcceptanceEstimate, expected_tokens_per_pass
from control.stats.errors import InsufficientSamplesError, StatsError


class DepthRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    k: int
    expected_tokens_per_pass: float
    expected_speedup: float
    extrapolated: bool = Field(description="Uses positions deeper than those measured.")


class DepthAdvice(BaseModel):
    model_config = ConfigDict(frozen=True)

    best_k: int
    best_expected_speedup: float
    speculation_pays: bool
    cost_ratio: float
    measured_positions: int
    fill_rate: float | None
    table: tuple[DepthRow, ...]


def advise_depth(
    acceptance: AcceptanceEstimate | Sequence[float | None],
    cost_ratio: float,
    k_max: int,
    fill_rate: float | None = None,
) -> DepthAdvice:
    """Best k in 1..k_max for the per-position rates and the cost ratio c.

    With an `AcceptanceEstimate`, the fill rate for unmeasured positions
    defaults to its pooled alpha (the moment estimate when only aggregate
    counters exist, so every position is then extrapolated).
    """
    if k_max < 1:
        raise StatsError(f"k_max must be >= 1, got {k_max}")
    if not cost_ratio >= 0:
        raise StatsError(f"cost ratio {cost_ratio} must be >= 0")
    if isinstance(acceptance, AcceptanceEstimate):
        if acceptance.drafts == 0:
            raise InsufficientSamplesError("depth advice needs at least one draft")
        rates = acceptance.conditional_rates
        if fill_rate is None:
            fill_rate = acceptance.alpha
    else:
        rates = tuple(acceptance)
    if not rates and fill_rate is None:
        raise InsufficientSamplesError("no per-position rates and no fill rate")

    table = tuple(
        DepthRow(
            k=k,
            expected_tokens_per_pass=(tokens := expected_tokens_per_pass(rates, k, fill_rate)),
            expected_speedup=tokens / (1 + k * cost_ratio),
            extrapolated=k > len(rates),
        )
        for k in range(1, k_max + 1)
    )
    best = max(table, key=lambda row: (row.expected_speedup, -row.k))
    return DepthAdvice(
        best_k=best.k,
        best_expected_speedup=best.expected_speedup,
        speculation_pays=best.expected_speedup > 1.0,
        cost_ratio=cost_ratio,
        measured_positions=len(rates),
        fill_rate=fill_rate,
        table=table,
    )


def cost_ratio_from_speedup(measured_speedup: float, tokens_per_pass: float, k: int) -> float:
    """c = (tau / s - 1) / k: the draft/target cost ratio implied by a measured speedup."""
    if k < 1 or measured_speedup <= 0 or tokens_per_pass < 1:
        raise StatsError("need k >= 1, a positive speedup and tokens_per_pass >= 1")
    return max(0.0, (tokens_per_pass / measured_speedup - 1) / k)
