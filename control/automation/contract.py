"""The output contract as a production signal: paired greedy checks judged by a guard.

Gateways run a sampled share of a rollout's greedy requests on both arms and count,
per window, the pairs compared, the pairs equal, the first divergence positions and
the ids of the unequal ones (`control.contract.OutputContractCounts`, on the rollout's
spec-arm windows). Lossless speculation answers a greedy request with the target's own
tokens, so the arms should agree on every pair; `contract_max_mismatch` (> 0) allows
for fp32 kernels that break near-ties differently. The guard alarms when the unequal
share is provably above it: a one-sided sequential test on the cumulative counts since
the exposure began (`control.stats.rate_exceedance`) at the contract family's share of
the false-alarm budget. An alarm fails the rollout like any monitor (`verdicts`).
"""

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from control.contract import OutputContractCounts
from control.models import ThresholdSet
from control.stats import RateExceedance, rate_exceedance

# Request ids of unequal pairs kept in a decision's evidence (the newest ones).
EVIDENCE_IDS = 50


class ContractGuard(BaseModel):
    """The paired checks read since the exposure began, and the test on them."""

    model_config = ConfigDict(frozen=True)

    windows: int  # windows that carried checks
    pairs: int
    equal: int
    incomplete: int
    equal_share: float | None  # equal / pairs: the "equal share at T=0"
    mean_divergence: float | None  # mean first-divergence position of the unequal pairs
    mismatched_ids: list[str]
    test: RateExceedance


def contract_guard(
    counts: Iterable[OutputContractCounts], thresholds: ThresholdSet, alpha: float
) -> ContractGuard | None:
    """The guard over `counts` (oldest first); None when no window carried a check."""
    parts = [c for c in counts if c.pairs or c.incomplete]
    if not parts:
        return None
    pairs = sum(c.pairs for c in parts)
    equal = sum(c.equal for c in parts)
    unequal = pairs - equal
    ids = [rid for c in parts for rid in c.mismatched_ids]
    return ContractGuard(
        windows=len(parts),
        pairs=pairs,
        equal=equal,
        incomplete=sum(c.incomplete for c in parts),
        equal_share=equal / pairs if pairs else None,
        mean_divergence=sum(c.divergence_sum for c in parts) / unequal if unequal else None,
        mismatched_ids=ids[-EVIDENCE_IDS:],
        test=rate_exceedance(
            unequal, pairs, allowed_rate=thresholds.contract_max_mismatch, alpha=alpha
        ),
    )
