"""The output contract as a production signal: paired checks judged by a guard.

Gateways run a sampled share of a rollout's single-choice requests on both arms and
count, per window (`specwire.OutputContractCounts`, on the rollout's spec-arm
windows; `gateway.proxy.pair_check` says how each pair is compared):

- **Greedy pairs**: compared, equal, the first divergence positions and the ids of the
  unequal ones. Lossless speculation answers a greedy request with the target's own
  tokens, so the arms should agree on every pair; `contract_max_mismatch` (> 0) allows
  for fp32 kernels that break near-ties differently. Alarm when the unequal share is
  provably above it.
- **Sampled pairs**: how often the target found the spec arm's completion likelier
  than the baseline's, and less likely. Lossless speculation samples from the target's
  distribution, so the two draws are exchangeable and each way is as likely as the
  other; alarm when either share (of the pairs that were not ties) is provably above
  1/2 + `contract_sampled_margin`.

Each is a one-sided sequential test on the cumulative counts since the exposure began
(`control.stats.rate_exceedance`): the greedy test at half of the contract family's
share of the false-alarm budget, each sampled direction at a quarter, so the three
together stay within the family's share. An alarm fails the rollout like any monitor
(`verdicts`).
"""

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from control.models import ThresholdSet
from control.stats import RateExceedance, rate_exceedance
from specwire import OutputContractCounts

# Request ids of unequal pairs kept in a decision's evidence (the newest ones).
EVIDENCE_IDS = 50


class ContractGuard(BaseModel):
    """The paired checks read since the exposure began, and the tests on them."""

    model_config = ConfigDict(frozen=True)

    windows: int  # windows that carried checks
    pairs: int  # greedy pairs compared
    equal: int
    incomplete: int
    equal_share: float | None  # equal / pairs: the "equal share at T=0"
    mean_divergence: float | None  # mean first-divergence position of the unequal pairs
    mismatched_ids: list[str]
    test: RateExceedance  # greedy: unequal share > contract_max_mismatch
    sampled_spec_higher: int
    sampled_spec_lower: int
    sampled_ties: int
    # spec_higher / (spec_higher + spec_lower): the divergence statistic, 1/2 when lossless
    sampled_higher_share: float | None
    sampled_higher_ids: list[str]
    sampled_lower_ids: list[str]
    sampled_higher_test: RateExceedance  # share > 1/2 + margin
    sampled_lower_test: RateExceedance  # share < 1/2 - margin

    @property
    def alarm(self) -> bool:
        return self.test.alarm or self.sampled_higher_test.alarm or self.sampled_lower_test.alarm


def contract_guard(
    counts: Iterable[OutputContractCounts], thresholds: ThresholdSet, alpha: float
) -> ContractGuard | None:
    """The guard over `counts` (oldest first); None when no window carried a check.
    `alpha` is the contract family's share of the false-alarm budget."""
    parts = [c for c in counts if c.checks]
    if not parts:
        return None
    pairs = sum(c.pairs for c in parts)
    equal = sum(c.equal for c in parts)
    unequal = pairs - equal
    ids = [rid for c in parts for rid in c.mismatched_ids]
    higher = sum(c.sampled_spec_higher for c in parts)
    lower = sum(c.sampled_spec_lower for c in parts)
    decisive = higher + lower
    allowed = 0.5 + thresholds.contract_sampled_margin
    return ContractGuard(
        windows=len(parts),
        pairs=pairs,
        equal=equal,
        incomplete=sum(c.incomplete for c in parts),
        equal_share=equal / pairs if pairs else None,
        mean_divergence=sum(c.divergence_sum for c in parts) / unequal if unequal else None,
        mismatched_ids=ids[-EVIDENCE_IDS:],
        test=rate_exceedance(
            unequal, pairs, allowed_rate=thresholds.contract_max_mismatch, alpha=alpha / 2
        ),
        sampled_spec_higher=higher,
        sampled_spec_lower=lower,
        sampled_ties=sum(c.sampled_ties for c in parts),
        sampled_higher_share=higher / decisive if decisive else None,
        sampled_higher_ids=[r for c in parts for r in c.sampled_higher_ids][-EVIDENCE_IDS:],
        sampled_lower_ids=[r for c in parts for r in c.sampled_lower_ids][-EVIDENCE_IDS:],
        sampled_higher_test=rate_exceedance(
            higher, decisive, allowed_rate=allowed, alpha=alpha / 4
        ),
        sampled_lower_test=rate_exceedance(lower, decisive, allowed_rate=allowed, alpha=alpha / 4),
    )
