"""Sticky cohort buckets: a pure function of (salt, tenant, key).

No process state and no randomness, so every gateway replica, before and after
a restart, puts the same user in the same arm for a given rollout salt.
"""

import hashlib

BUCKETS = 10_000


def cohort_bucket(salt: str, tenant: str, key: str) -> int:
    """Bucket in [0, 10000): first 8 bytes of sha256(salt|tenant|key), big-endian."""
    digest = hashlib.sha256(f"{salt}|{tenant}|{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS


def in_spec_cohort(salt: str, tenant: str, key: str, percentage: float) -> bool:
    # percentage has two decimals of resolution: 0.01 % is one bucket.
    return cohort_bucket(salt, tenant, key) < round(percentage * 100)
