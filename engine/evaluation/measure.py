"""Pure arithmetic of an offline evaluation, from per-case acceptance histograms.

vLLM's per-request summary gives, for each request, `acceptance_histogram[j]` =
verification steps that accepted exactly j of the k draft tokens. Acceptance is
a prefix, so position i (1-based) was reached in every step with j >= i - 1
and accepted in every step with j >= i:

    conditional rate r_i = steps with j >= i / steps with j >= i - 1
    mean acceptance length = 1 + sum_j j * h_j / sum_j h_j   (tokens per target pass)
    expected speedup at depth d = tau(d) / (1 + d c),  tau(d) = 1 + sum_{i<=d} prod_{j<=i} r_j

Depths beyond the measured k use the pooled per-token acceptance (accepted /
drafted) for the missing positions, which usually overstates deep positions;
the result marks them.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Tally:
    cases: int = 0
    histogram: list[int] = field(default_factory=list)  # [k + 1]

    def add(self, histogram: Sequence[int]) -> None:
        if len(self.histogram) < len(histogram):
            self.histogram += [0] * (len(histogram) - len(self.histogram))
        for j, n in enumerate(histogram):
            self.histogram[j] += int(n)
        self.cases += 1

    @property
    def steps(self) -> int:
        return sum(self.histogram)

    @property
    def accepted(self) -> int:
        return sum(j * n for j, n in enumerate(self.histogram))

    @property
    def k(self) -> int:
        return max(len(self.histogram) - 1, 0)

    def conditional_rates(self) -> list[float]:
        """[k]: P(position i accepted | position i reached)."""
        rates = []
        for i in range(1, self.k + 1):
            reached = sum(self.histogram[i - 1 :])
            accepted = sum(self.histogram[i:])
            rates.append(accepted / reached if reached else 0.0)
        return rates

    def mean_acceptance_length(self) -> float | None:
        return 1.0 + self.accepted / self.steps if self.steps else None

    def acceptance_rate(self) -> float | None:
        drafted = self.steps * self.k
        return self.accepted / drafted if drafted else None


def tokens_per_pass(rates: Sequence[float], depth: int, fill: float) -> float:
    tokens, reach = 1.0, 1.0
    for i in range(depth):
        reach *= rates[i] if i < len(rates) else fill
        tokens += reach
    return tokens


def expected_speedups(tally: Tally, depths: Sequence[int], cost_ratio: float) -> dict[str, float]:
    rates = tally.conditional_rates()
    fill = tally.acceptance_rate() or 0.0
    return {
        str(d): tokens_per_pass(rates, d, fill) / (1.0 + d * cost_ratio) for d in sorted(depths)
    }
