"""The error monitor reads arm errors only: a client's invalid requests (the windows'
`client_errors`, a 4xx the engine relayed) neither raise the spec arm's error rate nor
dilute it. Windows go through the real ingestion into the database, the guard job
judges them; the same requests counted as arm errors do roll the canary back."""

from sqlalchemy import select

from control.automation.gather import gather_evidence
from control.automation.pipeline import Job, judge_one
from control.db import Database
from control.models import Rollout, TelemetryWindowRow, utcnow
from control.settings import ControlSettings
from control.telemetry.service import ingest_batch
from specwire import Arm
from tests.control.automation import scenario as sc

WINDOWS = 8
REFUSED = 25  # extra spec requests per window that ended in a 4xx (or, below, a 5xx)


def _feed(database: Database, setup: sc.Setup, *, as_client_errors: bool) -> None:
    sent = sc.batch(setup, setup.rng, spec_tpot_ms=15.0, baseline_tpot_ms=15.0)
    windows = []
    for w in sent.windows:
        if w.arm is Arm.SPEC:
            extra = {"client_errors": REFUSED} if as_client_errors else {"errors": REFUSED}
            w = w.model_copy(update={"requests": w.requests + REFUSED, **extra})
        windows.append(w)
    with database.session() as s:
        ack = ingest_batch(s, sent.model_copy(update={"windows": windows}))
        assert ack.stored == 2


def test_client_errors_never_move_the_error_monitor(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    settings = control_settings.model_copy(update={"guard_on_telemetry": False})
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    for _ in range(WINDOWS):
        _feed(committed_database, setup, as_client_errors=True)
        outcome = judge_one(committed_database, settings, Job.GUARD, setup.rollout_id, None)
        assert outcome.action not in ("rollback", "disable"), outcome

    with committed_database.session() as s:
        stored = list(
            s.scalars(
                select(TelemetryWindowRow).where(
                    TelemetryWindowRow.rollout_id == setup.rollout_id,
                    TelemetryWindowRow.arm == "spec",
                )
            )
        )
        assert sum(w.client_errors for w in stored) == WINDOWS * REFUSED
        assert sum(w.errors for w in stored) == 0
        rollout = s.get(Rollout, setup.rollout_id)
        assert rollout is not None
        evidence = gather_evidence(s, rollout, settings, until=utcnow(), spec_workers=1)
    guard = evidence.error_guard
    assert guard is not None
    assert (guard.spec_rate, guard.baseline_rate) == (0.0, 0.0)
    assert not guard.cusum.alarm
    # The requests the arm served: the refused ones are not in the error rate's denominator.
    assert evidence.spec.requests == evidence.baseline.requests == WINDOWS * 100
    assert sc.rollout(committed_database, setup.rollout_id).state == "canary"


def test_the_same_requests_as_arm_errors_roll_the_canary_back(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    # The contrast that shows the test above could fail: 25 of 125 spec requests (20 %)
    # as arm errors against none on the baseline.
    settings = control_settings.model_copy(update={"guard_on_telemetry": False})
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    actions = []
    for _ in range(WINDOWS):
        _feed(committed_database, setup, as_client_errors=False)
        actions.append(judge_one(committed_database, settings, Job.GUARD, setup.rollout_id, None))
        if actions[-1].action == "rollback":
            break
    assert actions[-1].action == "rollback", actions
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.kind == "guard_error_regression", decision.kind
