"""A started rollout for a simulation: its own pair version, pools, segment and
threshold set, moved out of `draft` by an admin `start` with the stage gates waived."""

from dataclasses import dataclass

from sqlalchemy.orm import Session

from control.models import Pair, PairVersion, Pool, Rollout, Segment, ThresholdSet
from control.rollouts.gates import StageGate
from control.rollouts.service import transition_rollout
from control.rollouts.state_machine import RolloutAction


@dataclass(frozen=True)
class SeededRollout:
    rollout: Rollout
    segment_id: int
    pair_version_id: int
    spec_pool_id: int
    baseline_pool_id: int
    threshold_set_id: int


def seed_rollout(
    session: Session,
    *,
    tag: str,
    pair_name: str,
    model: str,
    k: int,
    engine_version: str,
    thresholds: ThresholdSet,
    stages: list[float],
    actor: str,
    reason: str,
    waive: frozenset[StageGate],
) -> SeededRollout:
    """Add the rows (`thresholds` unsaved) and `start` the rollout, waiving `waive`.

    The pools serve `model` (target `<model>-target`, draft `<model>-draft`); the
    names end in `tag`, so runs that share a database do not collide.
    """
    pair = Pair(name=pair_name)
    session.add(pair)
    session.flush()
    version = PairVersion(
        pair_id=pair.id,
        version=1,
        method="draft_model",
        target_ref=f"{model}-target",
        target_digest="0" * 64,
        draft_ref=f"{model}-draft",
        draft_digest="1" * 64,
        num_speculative_tokens=k,
        tokenizer_hash="2" * 64,
        engine_version=engine_version,
    )
    session.add(version)
    session.flush()
    spec = Pool(
        name=f"spec-{tag}",
        served_model_name=model,
        target_ref=f"{model}-target",
        pair_version_id=version.id,
    )
    baseline = Pool(name=f"base-{tag}", served_model_name=model, target_ref=f"{model}-target")
    segment = Segment(name=f"seg-{tag}", selector={})
    session.add_all([spec, baseline, segment, thresholds])
    session.flush()
    rollout = Rollout(
        name=f"r-{tag}",
        segment_id=segment.id,
        pair_version_id=version.id,
        spec_pool_id=spec.id,
        baseline_pool_id=baseline.id,
        threshold_set_id=thresholds.id,
        stages=stages,
        cohort_salt=tag,
    )
    session.add(rollout)
    session.flush()
    started = transition_rollout(
        session,
        rollout.id,
        RolloutAction.START,
        expected_version=rollout.version,
        actor=actor,
        reason=reason,
        evidence=None,
        task_id=None,
        kind=None,
        waive=waive,
    )
    return SeededRollout(started, segment.id, version.id, spec.id, baseline.id, thresholds.id)
