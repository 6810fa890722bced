"""Serving the compiled snapshot: sweep stale workers, then compile once per version.

Gateways poll at about 1 Hz each, so the common answer is "unchanged": that
costs one cheap staleness check and one version read, never a compile. The
serialized body is cached too, so a 200 to a new gateway is a memory copy.

The version is read before any data: on PostgreSQL (READ COMMITTED) each
statement may see newer commits than the one before, and since every change
bumps the version in its own transaction, data read after the version is never
older than that version. The reverse order could label old data with a new
version, and the cache would then serve it until the next bump.
"""

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from control.models import utcnow
from control.settings import ControlSettings
from control.snapshot.compiler import compile_snapshot
from control.snapshot.repository import read_version_stamp
from control.workers.service import sweep_stale_workers
from specwire import QuotaWeights


@dataclass(frozen=True)
class CompiledSnapshot:
    version: int
    # NOTE: the bump time is part of the cache key so that a database whose version
    # counter went back (restored backup, rolled-back test transaction) never gets
    # another database's document under the same number.
    bumped_at: datetime | None
    body: bytes

    @property
    def etag(self) -> str:
        return f'"{self.version}"'


class SnapshotService:
    def __init__(
        self,
        *,
        ttl_seconds: float,
        stale_after: timedelta,
        quota_weights: QuotaWeights,
        started_at: datetime | None = None,
        restart_grace: timedelta = timedelta(0),
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.stale_after = stale_after
        # NOTE: a worker's silence while control itself was down says nothing about the
        # worker: until `restart_grace` after the start, nobody counts as stale, so the
        # first snapshots after an outage do not empty every pool. (A worker that
        # really died is then caught by the gateway's breaker, and by the sweep once
        # the grace is over.)
        self.grace_until = started_at + restart_grace if started_at is not None else None
        self.quota_weights = quota_weights
        self.compilations = 0
        self._lock = threading.Lock()
        self._cached: CompiledSnapshot | None = None

    @classmethod
    def from_settings(cls, settings: ControlSettings) -> "SnapshotService":
        return cls(
            ttl_seconds=settings.snapshot_ttl_s,
            stale_after=timedelta(seconds=settings.workers.stale_after_s),
            quota_weights=settings.quota_weights,
            started_at=utcnow(),
            restart_grace=timedelta(seconds=settings.workers.restart_grace_s),
        )

    def in_restart_grace(self, now: datetime) -> bool:
        return self.grace_until is not None and now < self.grace_until

    def current_stamp(
        self, session: Session, *, now: datetime | None = None
    ) -> tuple[int, datetime | None]:
        """Version and bump time after sweeping stale workers (which may bump it)."""
        now = now or utcnow()
        if not self.in_restart_grace(now):
            sweep_stale_workers(session, stale_after=self.stale_after, now=now)
        return read_version_stamp(session)

    def current(self, session: Session, *, now: datetime | None = None) -> CompiledSnapshot:
        now = now or utcnow()
        return self.compiled_for(session, self.current_stamp(session, now=now), now=now)

    def compiled_for(
        self,
        session: Session,
        stamp: tuple[int, datetime | None],
        *,
        now: datetime | None = None,
    ) -> CompiledSnapshot:
        """The document for `stamp`, which must have been read in this transaction."""
        version, bumped_at = stamp
        with self._lock:
            cached = self._cached
        if cached is not None and (cached.version, cached.bumped_at) == stamp:
            return cached
        now = now or utcnow()
        # During the restart grace no worker is stale by age (its own healthy flag
        # still counts); the first sweep after the grace bumps the version if any is.
        stale_after = timedelta.max if self.in_restart_grace(now) else self.stale_after
        snapshot = compile_snapshot(
            session,
            version=version,
            now=now,
            ttl_seconds=self.ttl_seconds,
            stale_after=stale_after,
            quota_weights=self.quota_weights,
        )
        compiled = CompiledSnapshot(
            version=version, bumped_at=bumped_at, body=snapshot.model_dump_json().encode()
        )
        with self._lock:
            self.compilations += 1
            # NOTE: two requests may compile concurrently; the older one must not win.
            if self._cached is None or self._cached.version <= compiled.version:
                self._cached = compiled
        return compiled
