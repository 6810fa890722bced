"""The one function that decides a pool's desired worker count.

NOTE: deliberately a single seam. Today it returns what the admin stored
(`desired_workers`, PATCH /admin/v1/pools/{id}); capacity that follows a
rollout's stage share (the fleet-verdicts issue) replaces this function's body,
and every consumer (the pool spec agents read, the Kubernetes scaler) follows.
"""

from sqlalchemy.orm import Session

from control.models import Pool


def desired_workers(session: Session, pool: Pool) -> int:
    """Workers `pool` should run now (>= 0). `session` is there for policies that
    read more than the pool (rollout stage, measured traffic)."""
    del session  # the admin's number needs nothing else
    return pool.desired_workers
