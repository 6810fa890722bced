"""The output contract guard: paired greedy checks on the spec arm's windows go through
the real ingestion into the database, the guard job judges them. Equal pairs (and a
mismatch rate at the allowed one) leave a canary alone; a spec arm whose greedy answers
differ is rolled back, and the decision keeps the counts and the unequal request ids."""

from control.automation.pipeline import Job, judge_one
from control.contract import Arm, OutputContractCounts
from control.db import Database
from control.settings import ControlSettings
from control.telemetry.service import ingest_batch
from tests.control.automation import scenario as sc

WINDOWS = 6
PAIRS = 10  # paired checks per window


def _feed(database: Database, setup: sc.Setup, window: int, unequal: int) -> None:
    sent = sc.batch(setup, setup.rng, spec_tpot_ms=15.0, baseline_tpot_ms=15.0)
    ids = [f"w{window}-r{i}" for i in range(unequal)]
    contract = OutputContractCounts(
        pairs=PAIRS, equal=PAIRS - unequal, divergence_sum=5 * unequal, mismatched_ids=ids
    )
    windows = [
        w.model_copy(update={"output_contract": contract}) if w.arm is Arm.SPEC else w
        for w in sent.windows
    ]
    with database.session() as s:
        ack = ingest_batch(s, sent.model_copy(update={"windows": windows}))
        assert ack.stored == 2


def test_equal_pairs_never_trip_the_contract_guard(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    settings = control_settings.model_copy(update={"guard_on_telemetry": False})
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    for window in range(WINDOWS):
        _feed(committed_database, setup, window, unequal=0)
        outcome = judge_one(committed_database, settings, Job.GUARD, setup.rollout_id, None)
        assert outcome.action == "wait", outcome
    assert sc.rollout(committed_database, setup.rollout_id).state == "canary"


def test_unequal_greedy_pairs_roll_the_canary_back_with_their_request_ids(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    settings = control_settings.model_copy(update={"guard_on_telemetry": False})
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    rolled_back_at = None
    for window in range(WINDOWS):
        # Half the pairs differ against an allowed 1 %: one window is evidence enough.
        _feed(committed_database, setup, window, unequal=5)
        outcome = judge_one(committed_database, settings, Job.GUARD, setup.rollout_id, None)
        if outcome.action == "rollback":
            rolled_back_at = window
            break
    assert rolled_back_at == 0
    row = sc.rollout(committed_database, setup.rollout_id)
    assert row.state == "rolled_back"
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.kind == "guard_output_contract"
    oc = decision.evidence["statistics"]["output_contract"]
    assert (oc["pairs"], oc["equal"], oc["equal_share"], oc["mean_divergence"]) == (
        10,
        5,
        0.5,
        5.0,
    )
    assert oc["mismatched_ids"] == [f"w0-r{i}" for i in range(5)]
    assert oc["test"]["alarm"] and oc["test"]["allowed_rate"] == 0.01
    assert "output contract broken: 5 of 10 greedy pairs" in decision.evidence["verdict"]["reason"]
    assert decision.record_markdown is not None
    assert "unequal request ids: w0-r0, w0-r1" in decision.record_markdown
