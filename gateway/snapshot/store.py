"""The gateway's current policy snapshot and the indexes built from it."""

import hashlib
import hmac
import time
from dataclasses import dataclass

from control.contract import PolicySnapshot, TenantSpec


@dataclass(frozen=True, slots=True)
class _Loaded:
    snapshot: PolicySnapshot
    etag: str | None
    key_hashes: tuple[tuple[str, TenantSpec], ...]


class SnapshotStore:
    """Holds one immutable snapshot; replaced atomically by the poller.

    Age is the time since control last confirmed the snapshot (a 200 or a 304);
    without such a confirmation (a static file) it is the time since the
    snapshot was generated. Past its TTL every segment fails safe to baseline.
    """

    def __init__(self) -> None:
        self._loaded: _Loaded | None = None
        self._confirmed_at: float | None = None

    @property
    def snapshot(self) -> PolicySnapshot | None:
        return self._loaded.snapshot if self._loaded is not None else None

    @property
    def etag(self) -> str | None:
        return self._loaded.etag if self._loaded is not None else None

    @property
    def ready(self) -> bool:
        return self._loaded is not None

    def replace(self, snapshot: PolicySnapshot, *, etag: str | None, confirmed: bool) -> bool:
        """Install `snapshot` unless it is older than the current one; True if installed."""
        current = self.snapshot
        if current is not None and snapshot.version < current.version:
            return False
        hashes = tuple((h.lower(), t) for t in snapshot.tenants for h in t.key_hashes)
        self._loaded = _Loaded(snapshot=snapshot, etag=etag, key_hashes=hashes)
        self._confirmed_at = time.time() if confirmed else None
        return True

    def confirm(self) -> None:
        """Control answered 304: the snapshot we hold is still its current one."""
        if self._loaded is not None:
            self._confirmed_at = time.time()

    def age_s(self, now: float | None = None) -> float:
        if self._loaded is None:
            return float("inf")
        now = time.time() if now is None else now
        reference = self._confirmed_at
        if reference is None:
            reference = self._loaded.snapshot.generated_at.timestamp()
        return max(0.0, now - reference)

    def tenant_for_key(self, api_key: str) -> TenantSpec | None:
        """Constant-time per stored hash; every hash is compared, no early exit."""
        if self._loaded is None:
            return None
        presented = hashlib.sha256(api_key.encode()).hexdigest()
        found: TenantSpec | None = None
        for stored, tenant in self._loaded.key_hashes:
            if hmac.compare_digest(presented, stored) and found is None:
                found = tenant
        return found
