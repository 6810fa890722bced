"""Windowed aggregation of request records into telemetry batches.

A window is keyed by (segment, arm, pair version, rollout, window start); all
windows sharing a start, with the sampled per-request records that finished in
it (at most `max_records_per_window`; the rest are counted), form one
``TelemetryBatch``, which control stores
idempotently by (gateway id, window start). Hence a window start, once drained,
must never be emitted again: a record arriving late for it is counted in the
next open window instead of producing a second batch that control would discard
as a duplicate.
"""

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from gateway.telemetry.buckets import bucket_index
from gateway.telemetry.pair_record import PairRecord, SampledOutcome
from gateway.telemetry.record import RequestRecord, record_doc
from specwire import (
    COUNTER_FIELDS,
    HISTOGRAM_FIELDS,
    LATENCY_BUCKETS_MS,
    MAX_MISMATCH_IDS,
    POSITION_BUCKETS,
    POSITION_LABELS,
    SLICE_HISTOGRAM_FIELDS,
    Arm,
    LatencyHistogram,
    LoadSlice,
    LoadTotals,
    OutputContractCounts,
    PositionTokens,
    RequestAcceptance,
    RequestRecordDoc,
    TelemetryBatch,
    TelemetryWindow,
    load_bucket,
    log_ms,
)
from specwire.telemetry import UNKNOWN

log = logging.getLogger(__name__)

_N_COUNTS = len(LATENCY_BUCKETS_MS) + 1

WindowKey = tuple[int | None, Arm, int | None, int | None]


@dataclass(slots=True)
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * _N_COUNTS)
    sum_ms: float = 0.0
    sum_log: float = 0.0
    sum_sq_log: float = 0.0

    def add(self, value_ms: float | None) -> None:
        if value_ms is None:
            return
        self.counts[bucket_index(value_ms)] += 1
        self.sum_ms += value_ms
        log_value = log_ms(value_ms)
        self.sum_log += log_value
        self.sum_sq_log += log_value * log_value

    def to_contract(self) -> LatencyHistogram:
        return LatencyHistogram(
            counts=list(self.counts),
            sum_ms=self.sum_ms,
            sum_log=self.sum_log,
            sum_sq_log=self.sum_sq_log,
        )


def _histograms(names: tuple[str, ...]) -> dict[str, _Histogram]:
    return {name: _Histogram() for name in names}


@dataclass(slots=True)
class _LoadSlice:
    requests: int = 0
    load_sum: int = 0
    histograms: dict[str, _Histogram] = field(
        default_factory=lambda: _histograms(SLICE_HISTOGRAM_FIELDS)
    )

    def add(self, load: int, latencies: dict[str, float | None]) -> None:
        self.requests += 1
        self.load_sum += load
        for name, histogram in self.histograms.items():
            histogram.add(latencies[name])

    def to_contract(self, bucket: int) -> LoadSlice:
        return LoadSlice(
            load_bucket=bucket,
            requests=self.requests,
            load_sum=self.load_sum,
            **{name: h.to_contract() for name, h in self.histograms.items()},
        )


@dataclass(slots=True)
class _LoadTotals:
    """`LoadTotals` as plain counters: a request adds to them without pydantic's
    attribute assignment (~1 us each, four per dispatched request)."""

    dispatched: int = 0
    gateway_load_sum: int = 0
    engine_running_sum: int = 0
    engine_waiting_sum: int = 0

    def to_contract(self) -> LoadTotals:
        # NOTE: model_construct, as the model_copy of a mutated model was: unvalidated.
        return LoadTotals.model_construct(**asdict(self))


@dataclass(slots=True)
class _RequestAcceptance:
    """`RequestAcceptance` as plain counters (six assignments per judged request)."""

    requests: int = 0
    judged: int = 0
    accepted: int = 0
    accepted_sq: int = 0
    accepted_judged: int = 0
    judged_sq: int = 0

    def to_contract(self) -> RequestAcceptance:
        return RequestAcceptance.model_construct(**asdict(self))


@dataclass(slots=True)
class _Accumulator:
    """One window's counters, in the contract's own names (`specwire.WindowCounts`);
    each request adds its `RequestRecord.counts()` and `latencies()`."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTER_FIELDS, 0))
    accepted_per_position: list[int] = field(default_factory=list)
    histograms: dict[str, _Histogram] = field(default_factory=lambda: _histograms(HISTOGRAM_FIELDS))
    by_load: dict[int, _LoadSlice] = field(default_factory=dict)
    load: _LoadTotals = field(default_factory=_LoadTotals)
    acceptance: _RequestAcceptance = field(default_factory=_RequestAcceptance)
    # response-position bucket -> [drafted, accepted] tokens
    positions: dict[str, list[int]] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return self.counts["requests"]

    def add(self, rec: RequestRecord) -> None:
        # NOTE: keyed by the contract's names: a counter the record does not fill is a
        # KeyError here, never a silent zero.
        counts, added = self.counts, rec.counts()
        for name in counts:
            counts[name] += added[name]
        per_pos = self.accepted_per_position
        if len(rec.accepted_per_position) > len(per_pos):
            per_pos.extend([0] * (len(rec.accepted_per_position) - len(per_pos)))
        for i, n in enumerate(rec.accepted_per_position):
            per_pos[i] += n
        latencies = rec.latencies()
        for name, histogram in self.histograms.items():
            histogram.add(latencies[name])
        # NOTE: a client error (a mirrored copy the engine refused) is no load sample.
        if rec.gateway_load is not None and rec.outcome != "client_error":
            self._add_load(rec, rec.gateway_load, latencies)
        judged = rec.judged_positions
        if judged is not None:
            acc, a = self.acceptance, rec.accepted_tokens
            acc.requests += 1
            acc.judged += judged
            acc.accepted += a
            acc.accepted_sq += a * a
            acc.accepted_judged += a * judged
            acc.judged_sq += judged * judged
        self._add_positions(rec)

    def to_contract(
        self,
        key: WindowKey,
        started: datetime,
        seconds: int,
        contract: OutputContractCounts | None = None,
    ) -> TelemetryWindow:
        seg, arm, pv, ro = key
        return TelemetryWindow(
            segment_id=seg,
            arm=arm,
            pair_version_id=pv,
            rollout_id=ro,
            window_start=started,
            window_seconds=seconds,
            **self.counts,
            accepted_per_position=list(self.accepted_per_position),
            **{name: h.to_contract() for name, h in self.histograms.items()},
            by_load=[sl.to_contract(bucket) for bucket, sl in sorted(self.by_load.items())],
            load=self.load.to_contract(),
            request_acceptance=self.acceptance.to_contract(),
            by_response_position={
                bucket: PositionTokens(drafted_tokens=d, accepted_tokens=a)
                for bucket in POSITION_BUCKETS
                if bucket in self.positions
                for d, a in [self.positions[bucket]]
            },
            output_contract=contract.model_copy() if contract else OutputContractCounts(),
        )

    def _add_positions(self, rec: RequestRecord) -> None:
        """The request's drafted and accepted tokens into their response-position buckets;
        without per-step arrays all of them into UNKNOWN, so the buckets add up to the
        window's drafted and accepted tokens (as in gateway.metrics)."""
        by_position = rec.by_response_position
        parts = (
            [(UNKNOWN, rec.drafted_tokens, rec.accepted_tokens)]
            if by_position is None
            else [(b, d, a) for b, (d, a) in zip(POSITION_LABELS, by_position, strict=True)]
        )
        for bucket, drafted, accepted in parts:
            if drafted == 0 and accepted == 0:
                continue  # NOTE: an empty bucket stays out of the window (baseline arms)
            tokens = self.positions.setdefault(bucket, [0, 0])
            tokens[0] += drafted
            tokens[1] += accepted

    def _add_load(
        self, rec: RequestRecord, gateway_load: int, latencies: dict[str, float | None]
    ) -> None:
        load = self.load
        load.dispatched += 1
        load.gateway_load_sum += gateway_load
        load.engine_running_sum += rec.engine_running or 0
        load.engine_waiting_sum += rec.engine_waiting or 0
        bucket = load_bucket(gateway_load)
        slice_ = self.by_load.get(bucket)
        if slice_ is None:
            slice_ = self.by_load[bucket] = _LoadSlice()
        slice_.add(max(gateway_load, 0), latencies)


@dataclass(slots=True)
class _Window:
    by_key: dict[WindowKey, _Accumulator] = field(default_factory=dict)
    records: list[RequestRecordDoc] = field(default_factory=list)
    records_dropped: int = 0
    refusals_kept: int = 0  # of `records`: requests refused before routing
    # Paired output checks, on the rollout's spec-arm key (a key with checks and no
    # request ships as a window of 0 requests).
    contract: dict[WindowKey, OutputContractCounts] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return sum(a.requests for a in self.by_key.values())


class TelemetryAggregator:
    def __init__(
        self,
        gateway_id: str,
        window_seconds: int,
        max_pending_windows: int,
        *,
        started_at: float | None = None,
        max_records_per_window: int = 1000,
        max_refusal_records_per_window: int = 100,
        on_record_dropped: Callable[[str], None] | None = None,
    ) -> None:
        if window_seconds <= 0:
            raise ValueError("window_seconds must be positive")
        if max_pending_windows <= 0:
            raise ValueError("max_pending_windows must be positive")
        self.gateway_id = gateway_id
        self.window_seconds = window_seconds
        self.max_pending_windows = max_pending_windows
        self.max_records_per_window = max_records_per_window
        self.max_refusal_records_per_window = max_refusal_records_per_window
        self.on_record_dropped = on_record_dropped
        # window start (epoch seconds) -> window; dicts keep insertion order,
        # and starts are inserted in increasing order, so the first is the oldest.
        self._windows: dict[int, _Window] = {}
        # NOTE: with started_at, the window this process was born in counts as drained:
        # a previous process with the same gateway id may have flushed it at shutdown,
        # and control would discard a second batch for it. Its records go one window on.
        self._last_drained_start: int | None = (
            None if started_at is None else self.window_start_of(started_at)
        )
        self._lock = threading.Lock()
        self.dropped_windows = 0
        self.dropped_requests = 0
        self.late_records = 0
        self.dropped_request_records = 0

    def window_start_of(self, t: float) -> int:
        return int(t // self.window_seconds) * self.window_seconds

    def record(self, rec: RequestRecord) -> None:
        start = self.window_start_of(rec.finished_at)
        key: WindowKey = (rec.segment_id, rec.arm, rec.pair_version_id, rec.rollout_id)
        # NOTE: the record's document is built (and validated) only while its window has
        # room: past the cap it would be dropped anyway, and building it is a third of
        # what recording a request costs. A record past the cap is then counted as
        # window_cap whether or not it would have been valid.
        room = self._has_room(start)
        doc = self._doc(rec) if room else None
        with self._lock:
            window = self._window_for(start)
            acc = window.by_key.get(key)
            if acc is None:
                acc = window.by_key[key] = _Accumulator()
            acc.add(rec)
            if not room and self._room_in(window):
                doc = self._doc(rec)  # its window was drained meanwhile: rare
            elif not room:
                self._drop_past_cap(window)
            if doc is not None:
                self._keep(window, doc)

    def _doc(self, rec: RequestRecord) -> RequestRecordDoc | None:
        try:
            return record_doc(rec)
        except ValueError:
            # A value past the contract's bounds must not cost the request its accounting.
            log.warning("request record %s does not fit the contract; not kept", rec.request_id)
            self._record_dropped("invalid")
            return None

    def _has_room(self, start: int) -> bool:
        """Whether the window a record of `start` goes to keeps one more routed record,
        read without the lock (`_keep` checks again under it)."""
        window = self._windows.get(self._open_start(start))
        return window is None or self._room_in(window)

    def _room_in(self, window: _Window) -> bool:
        return len(window.records) - window.refusals_kept < self.max_records_per_window

    def record_pair(self, rec: PairRecord) -> None:
        """Count one paired output check on its rollout's spec-arm window (a greedy
        pair's `pairs`/`equal`, a sampled pair's `sampled_*`)."""
        key: WindowKey = (rec.segment_id, Arm.SPEC, rec.pair_version_id, rec.rollout_id)
        with self._lock:
            window = self._window_for(self.window_start_of(rec.finished_at))
            counts = window.contract.get(key)
            if counts is None:
                counts = window.contract[key] = OutputContractCounts()
            outcome = rec.outcome
            if outcome is None:
                counts.incomplete += 1
                return
            if isinstance(outcome, SampledOutcome):
                _count_sampled(counts, outcome, rec.request_id)
                return
            counts.pairs += 1
            if outcome.equal:
                counts.equal += 1
                return
            counts.divergence_sum += outcome.first_divergence or 0
            if len(counts.mismatched_ids) < MAX_MISMATCH_IDS:
                counts.mismatched_ids.append(rec.request_id)

    def record_refusal(self, doc: RequestRecordDoc, finished_at: float) -> None:
        """Keep the record of a request refused before routing: it ships with the
        window's records and adds to no counter or histogram, which hold routed
        requests only. Refusals have their own cap, so a flood of bad keys cannot
        push the routed requests' records out of a window."""
        with self._lock:
            window = self._window_for(self.window_start_of(finished_at))
            if window.refusals_kept < self.max_refusal_records_per_window:
                window.records.append(doc)
                window.refusals_kept += 1
            else:
                window.records_dropped += 1
                self._record_dropped("refusal_cap")

    def _open_start(self, start: int) -> int:
        """The start of the window a record of `start` goes to: a window already drained
        is closed, so its late records go to the first one after it."""
        if self._last_drained_start is not None and start <= self._last_drained_start:
            return self._last_drained_start + self.window_seconds
        return start

    def _window_for(self, start: int) -> _Window:
        opened = self._open_start(start)
        if opened != start:
            self.late_records += 1
        window = self._windows.get(opened)
        return window if window is not None else self._open_window(opened)

    def _keep(self, window: _Window, doc: RequestRecordDoc) -> None:
        if self._room_in(window):
            window.records.append(doc)
        else:
            self._drop_past_cap(window)

    def _drop_past_cap(self, window: _Window) -> None:
        window.records_dropped += 1
        self._record_dropped("window_cap")

    def _record_dropped(self, reason: str) -> None:
        self.dropped_request_records += 1
        if self.on_record_dropped is not None:
            self.on_record_dropped(reason)

    def _open_window(self, start: int) -> _Window:
        # NOTE: bounded memory when nobody drains (control down and the flusher's own
        # queue is a separate bound): the oldest window goes first, counted.
        while len(self._windows) >= self.max_pending_windows:
            oldest = min(self._windows)
            dropped = self._windows.pop(oldest)
            self.dropped_windows += 1
            self.dropped_requests += dropped.requests
            self.dropped_request_records += len(dropped.records)
        window = _Window()
        self._windows[start] = window
        return window

    def drain_closed(self, now: float) -> list[TelemetryBatch]:
        """Batches for every window whose end is <= now, oldest first; they leave memory."""
        with self._lock:
            closed = sorted(s for s in self._windows if s + self.window_seconds <= now)
            taken = [(s, self._windows.pop(s)) for s in closed]
            if closed:
                last = closed[-1]
                if self._last_drained_start is None or last > self._last_drained_start:
                    self._last_drained_start = last
        return [self._to_batch(start, window) for start, window in taken]

    def drain_all(self) -> list[TelemetryBatch]:
        """Every window, open ones included: for shutdown."""
        return self.drain_closed(float("inf"))

    def pending_requests(self) -> int:
        with self._lock:
            return sum(w.requests for w in self._windows.values())

    def _to_batch(self, start: int, window: _Window) -> TelemetryBatch:
        started = datetime.fromtimestamp(start, UTC)
        return TelemetryBatch(
            gateway_id=self.gateway_id,
            window_start=started,
            windows=list(self._to_windows(started, window.by_key, window.contract)),
            requests=window.records,
            requests_dropped=window.records_dropped,
        )

    def _to_windows(
        self,
        started: datetime,
        window: dict[WindowKey, _Accumulator],
        contract: dict[WindowKey, OutputContractCounts],
    ) -> Iterator[TelemetryWindow]:
        def order(key: WindowKey) -> tuple[int, str, int, int]:
            seg, arm, pv, ro = key
            return (-1 if seg is None else seg, arm.value, pv or -1, ro or -1)

        for key in sorted(window.keys() | contract.keys(), key=order):
            acc = window.get(key) or _Accumulator()
            yield acc.to_contract(key, started, self.window_seconds, contract.get(key))


def _count_sampled(counts: OutputContractCounts, outcome: SampledOutcome, request_id: str) -> None:
    if outcome.sign == 0:
        counts.sampled_ties += 1
        return
    if outcome.sign > 0:
        counts.sampled_spec_higher += 1
        ids = counts.sampled_higher_ids
    else:
        counts.sampled_spec_lower += 1
        ids = counts.sampled_lower_ids
    if len(ids) < MAX_MISMATCH_IDS:
        ids.append(request_id)
