"""What an engine launcher needs to start a pool's workers: `PoolSpec`."""

from sqlalchemy.orm import Session

from control.capacity.policy import desired_workers
from control.internal import repository
from control.internal.limits import fits_int32_id
from control.models import PairVersion, Pool
from control.snapshot.compiler import pair_version_spec
from control.workers.errors import UnknownPool
from specwire import PoolSpec, SpeculativeConfig


def speculative_config(pv: PairVersion) -> SpeculativeConfig:
    """vLLM's --speculative-config for a pair version. Speculation is fixed per engine,
    so this is the whole difference between a spec pool and its baseline."""
    return SpeculativeConfig(
        method=pv.method,
        model=pv.draft_ref,
        num_speculative_tokens=pv.num_speculative_tokens,
        draft_sample_method=pv.draft_sample_method,
    )


def pool_spec(session: Session, pool: Pool) -> PoolSpec:
    pv = pool.pair_version
    return PoolSpec(
        id=pool.id,
        name=pool.name,
        served_model_name=pool.served_model_name,
        target_ref=pool.target_ref,
        pair_version=pair_version_spec(pv) if pv is not None else None,
        speculative_config=speculative_config(pv) if pv is not None else None,
        engine_args=dict(pool.engine_args or {}),
        desired_workers=desired_workers(session, pool),
    )


def _storable(name: str) -> bool:
    # A name no pool can have (NUL, longer than the column) is simply not found.
    return "\x00" not in name and len(name) <= 100


def pool_spec_by_id(session: Session, pool_id: int) -> PoolSpec:
    pool = repository.pool_by_id(session, pool_id) if fits_int32_id(pool_id) else None
    if pool is None:
        raise UnknownPool(f"pool {pool_id} does not exist", details={"pool_id": pool_id})
    return pool_spec(session, pool)


def pool_spec_by_name(session: Session, name: str) -> PoolSpec:
    pool = repository.pool_by_name(session, name) if _storable(name) else None
    if pool is None:
        raise UnknownPool(f"pool {name!r} does not exist", details={"pool_name": name})
    return pool_spec(session, pool)
