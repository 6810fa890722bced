"""Acceptance per LoRA adapter, aggregated from the request records.

Each record carries the adapter a request named (None: the base model), the pair
version that served it and the engine's own drafts / accepted counts, so one
pass over a time window gives every adapter's measured yield on every pair. The
records are sampled per tenant (100 % by default); a uniform sample leaves these
ratios unbiased, only noisier.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import RequestRecordRow
from control.repository import equal_to

_COLUMNS = (
    RequestRecordRow.adapter,
    RequestRecordRow.pair_version_id,
    RequestRecordRow.pair,
    RequestRecordRow.arm,
    RequestRecordRow.drafts,
    RequestRecordRow.drafted_tokens,
    RequestRecordRow.accepted_tokens,
    RequestRecordRow.accepted_per_position,
)
# NOTE: streamed in chunks; a window of a busy hour never sits in memory whole.
_CHUNK = 2000


@dataclass
class AdapterAcceptance:
    """One (adapter, pair version) over a window. Rates are None without drafts."""

    adapter: str | None
    pair_version_id: int | None
    pair: str | None
    requests: int = 0
    spec_requests: int = 0
    drafts: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)

    def add(self, arm: str, drafts: int, drafted: int, accepted: int, per_pos: list[int]) -> None:
        self.requests += 1
        self.spec_requests += arm == "spec"
        self.drafts += drafts
        self.drafted_tokens += drafted
        self.accepted_tokens += accepted
        if len(per_pos) > len(self.accepted_per_position):
            self.accepted_per_position += [0] * (len(per_pos) - len(self.accepted_per_position))
        for i, n in enumerate(per_pos):
            self.accepted_per_position[i] += n

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted tokens."""
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """1 + accepted tokens per draft: tokens each target step yields on average."""
        return 1 + self.accepted_tokens / self.drafts if self.drafts else None

    @property
    def per_position_rate(self) -> list[float]:
        """Accepted at position j / drafts (the engine's own per-position definition)."""
        return [n / self.drafts for n in self.accepted_per_position] if self.drafts else []


def aggregate(rows: Iterable[tuple[Any, ...]]) -> list[AdapterAcceptance]:
    """Fold (adapter, pair_version_id, pair, arm, drafts, drafted, accepted, per_position)
    rows into one entry per (adapter, pair version): the base model first, then by name."""
    groups: dict[tuple[str | None, int | None], AdapterAcceptance] = {}
    for adapter, pv_id, pair, arm, drafts, drafted, accepted, per_pos in rows:
        key = (adapter, pv_id)
        entry = groups.get(key)
        if entry is None:
            entry = groups[key] = AdapterAcceptance(adapter, pv_id, pair)
        entry.add(arm, drafts, drafted, accepted, list(per_pos or []))
    return sorted(
        groups.values(),
        key=lambda e: (e.adapter is not None, e.adapter or "", e.pair_version_id or 0),
    )


def acceptance_by_adapter(
    session: Session,
    *,
    since: datetime,
    until: datetime | None = None,
    adapter: str | None = None,
    segment_id: int | None = None,
    tenant: str | None = None,
) -> list[AdapterAcceptance]:
    """Every (adapter, pair version) with routed requests received in [since, until)."""
    filters: list[Any] = equal_to(
        (RequestRecordRow.adapter, adapter),
        (RequestRecordRow.segment_id, segment_id),
        (RequestRecordRow.tenant, tenant),
    )
    # NOTE: requests refused before routing (no arm) never reached an engine.
    filters.append(RequestRecordRow.arm.is_not(None))
    filters.append(RequestRecordRow.received_at >= since)
    if until is not None:
        filters.append(RequestRecordRow.received_at < until)
    query = select(*_COLUMNS).where(*filters).execution_options(yield_per=_CHUNK)
    return aggregate(tuple(row) for row in session.execute(query))
