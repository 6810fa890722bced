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

The cost ratio c (a draft pass over a target pass) is measured by timing both
engines on the same cases: decode seconds per verification step on the
speculating engine over decode seconds per token on a baseline engine serving
the same target is 1 + k c (`timed_cost_ratio`).
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


@dataclass(frozen=True)
class DecodeTiming:
    """One engine's decode time over a set of cases: from each case's first output token
    to its last, and how many passes of the model produced what came after the first."""

    seconds: float
    passes: int  # verification steps on a speculating engine; tokens after the first otherwise

    @property
    def seconds_per_pass(self) -> float | None:
        return self.seconds / self.passes if self.passes > 0 and self.seconds > 0 else None


def timed_cost_ratio(spec: DecodeTiming, baseline: DecodeTiming, k: int) -> float | None:
    """The draft/target cost ratio c the two engines showed: a verification step costs
    the target's decode step times (1 + k c) (k draft passes plus a k+1-token verify,
    the closed form's model), so c = (step / baseline token - 1) / k, at least 0.
    None when either engine measured nothing."""
    assert k >= 1, k
    step, token = spec.seconds_per_pass, baseline.seconds_per_pass
    if step is None or token is None:
        return None
    return max(0.0, (step / token - 1.0) / k)
