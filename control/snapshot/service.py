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

from control.contract import QuotaWeights
from control.models import utcnow
from control.settings import ControlSettings
from control.snapshot.compiler import compile_snapshot
from control.snapshot.repository import read_version_stamp
from control.workers.service import sweep_stale_workers


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
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.stale_after = stale_after
        self.quota_weights = quota_weights
        self.compilations = 0
        self._lock = threading.Lock()
        self._cached: CompiledSnapshot | None = None

    @classmethod
    def from_settings(cls, settings: ControlSettings) -> "SnapshotService":
        return cls(
            ttl_seconds=settings.snapshot_ttl_seconds,
            stale_after=timedelta(seconds=settings.worker_stale_after_seconds),
            quota_weights=settings.quota_weights,
        )

    def current_stamp(
        self, session: Session, *, now: datetime | None = None
    ) -> tuple[int, datetime | None]:
        """Version and bump time after sweeping stale workers (which may bump it)."""
        sweep_stale_workers(session, stale_after=self.stale_after, now=now or utcnow())
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
        snapshot = compile_snapshot(
            session,
            version=version,
            now=now or utcnow(),
            ttl_seconds=self.ttl_seconds,
            stale_after=self.stale_after,
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
