"""Whether a worker serves what its pool's pair version says: the target weights (by
digest) and the engine version. A worker that differs is excluded from routing with
a typed reason, so "change one dependency version" cannot slip into a comparison."""

from typing import Literal

from control.models import Pool, Worker
from specwire import same_engine_release

Exclusion = Literal["model_digest_mismatch", "engine_version_mismatch"]


def expected_target_digest(pool: Pool, baseline_of: dict[int, str]) -> str | None:
    """The digest the pool's workers must report: its pair version's target, or for a
    baseline pool the target of the rollouts it is the baseline of (None: unknown)."""
    if pool.pair_version is not None:
        return pool.pair_version.target_digest
    return baseline_of.get(pool.id)


def exclusion(
    worker: Worker, pool: Pool, expected_digest: str | None, *, engine: bool = True
) -> Exclusion | None:
    """Why the worker may not serve its pool's pair version; None when it may. A worker
    that does not report a digest or version (an older agent) is not excluded for it.
    With engine=False only the digest counts (the snapshot: gateways check the engine
    version themselves, reason engine_version_mismatch)."""
    digest = worker.model_digest
    if digest is not None and expected_digest is not None and digest != expected_digest:
        return "model_digest_mismatch"
    pv = pool.pair_version
    if (
        engine
        and pv is not None
        and worker.engine_version
        and pv.engine_version
        and not same_engine_release(worker.engine_version, pv.engine_version)
    ):
        return "engine_version_mismatch"
    return None
