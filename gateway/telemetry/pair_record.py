"""One paired check of the output contract, as telemetry keeps it: ids and counts only."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PairOutcome:
    equal: bool
    first_divergence: int | None  # None when equal


@dataclass(frozen=True, slots=True)
class SampledOutcome:
    """A sampled (T > 0) request answered by both arms: which arm's completion the
    target found likelier, by the mean log-probability of its tokens after the first
    (+1 the spec arm's, -1 the baseline's, 0 a tie or nothing to compare)."""

    sign: int


@dataclass(frozen=True, slots=True)
class PairRecord:
    """A request answered by both arms (`gateway.proxy.pair_check`)."""

    request_id: str
    segment_id: int | None
    pair_version_id: int | None
    rollout_id: int
    finished_at: float  # time.time()
    outcome: PairOutcome | SampledOutcome | None  # None: an arm failed, nothing compared
