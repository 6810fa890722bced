"""The gateway's current policy snapshot and the indexes built from it."""

import hashlib
import hmac
import time
from dataclasses import dataclass

from specwire import PolicySnapshot, TenantSpec


@dataclass(frozen=True, slots=True)
class _Loaded:
    snapshot: PolicySnapshot
    etag: str | None
    tenants_by_key_hash: dict[str, tuple[str, TenantSpec]]
    generated_at: float  # snapshot.generated_at as a timestamp, read once per request


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
        by_hash: dict[str, tuple[str, TenantSpec]] = {}
        for tenant in snapshot.tenants:
            for h in tenant.key_hashes:
                # A hash listed twice belongs to the first tenant that lists it.
                by_hash.setdefault(h.lower(), (h.lower(), tenant))
        self._loaded = _Loaded(
            snapshot=snapshot,
            etag=etag,
            tenants_by_key_hash=by_hash,
            generated_at=snapshot.generated_at.timestamp(),
        )
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
            reference = self._loaded.generated_at
        return max(0.0, now - reference)

    def tenant_for_key(self, api_key: str) -> TenantSpec | None:
        """The key's tenant, looked up by the key's SHA-256; O(1) in the number of keys.

        The lookup is by digest, never by the key: what its timing could reveal is
        where a digest's hash falls, which does not help to find a key. The hit
        is then confirmed with a constant-time compare.
        """
        if self._loaded is None:
            return None
        presented = hashlib.sha256(api_key.encode()).hexdigest()
        hit = self._loaded.tenants_by_key_hash.get(presented)
        if hit is None or not hmac.compare_digest(presented, hit[0]):
            return None
        return hit[1]
