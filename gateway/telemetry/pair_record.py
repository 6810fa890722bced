"""One paired check of the output contract, as telemetry keeps it: ids and counts only."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PairOutcome:
    equal: bool
    first_divergence: int | None  # None when equal


@dataclass(frozen=True, slots=True)
class PairRecord:
    """A greedy request answered by both arms (`gateway.proxy.pair_check`)."""

    request_id: str
    segment_id: int | None
    pair_version_id: int | None
    rollout_id: int
    finished_at: float  # time.time()
    outcome: PairOutcome | None  # None: an arm failed, nothing compared
