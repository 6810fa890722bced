"""The output contract guard: paired checks on the spec arm's windows go through the
real ingestion into the database, the guard job judges them. Equal greedy pairs, and
sampled pairs split evenly between the arms, leave a canary alone; a spec arm whose
greedy answers differ, or whose sampled completions the target scores higher far more
often than half the time, is rolled back, and the decision keeps the counts and the
request ids."""

from collections.abc import Callable

from control.automation.pipeline import Job, judge_one
from control.db import Database
from control.settings import ControlSettings
from control.telemetry.service import ingest_batch
from specwire import Arm, OutputContractCounts
from tests.control.automation import scenario as sc

WINDOWS = 6
PAIRS = 10  # paired checks per window


def _feed(database: Database, setup: sc.Setup, window: int, contract: OutputContractCounts) -> None:
    sent = sc.batch(setup, setup.rng, spec_tpot_ms=15.0, baseline_tpot_ms=15.0)
    windows = [
        w.model_copy(update={"output_contract": contract}) if w.arm is Arm.SPEC else w
        for w in sent.windows
    ]
    with database.session() as s:
        ack = ingest_batch(s, sent.model_copy(update={"windows": windows}))
        assert ack.stored == 2


def _judge_windows(
    database: Database,
    settings: ControlSettings,
    contract: Callable[[int], OutputContractCounts],
) -> tuple[sc.Setup, list[str]]:
    """Feed up to WINDOWS windows of `contract(window)` and judge after each; stop at a
    rollback. The rollout and the guard's action per window."""
    settings = settings.model_copy(update={"guard_on_telemetry": False})
    setup = sc.create_rollout(database)
    sc.heartbeat(database, setup, "spec-w1")
    actions: list[str] = []
    for window in range(WINDOWS):
        _feed(database, setup, window, contract=contract(window))
        actions.append(judge_one(database, settings, Job.GUARD, setup.rollout_id, None).action)
        if actions[-1] == "rollback":
            break
    return setup, actions


def _greedy(window: int, unequal: int) -> OutputContractCounts:
    return OutputContractCounts(
        pairs=PAIRS,
        equal=PAIRS - unequal,
        divergence_sum=5 * unequal,
        mismatched_ids=[f"w{window}-r{i}" for i in range(unequal)],
    )


def test_equal_pairs_never_trip_the_contract_guard(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    setup, actions = _judge_windows(committed_database, control_settings, lambda w: _greedy(w, 0))
    assert actions == ["wait"] * WINDOWS
    assert sc.rollout(committed_database, setup.rollout_id).state == "canary"


def test_unequal_greedy_pairs_roll_the_canary_back_with_their_request_ids(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    # Half the pairs differ against an allowed 1 %: one window is evidence enough.
    setup, actions = _judge_windows(committed_database, control_settings, lambda w: _greedy(w, 5))
    assert actions == ["rollback"]
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


def _sampled(window: int, higher: int, lower: int) -> OutputContractCounts:
    return OutputContractCounts(
        sampled_spec_higher=higher,
        sampled_spec_lower=lower,
        sampled_ties=1,
        sampled_higher_ids=[f"w{window}-h{i}" for i in range(higher)],
        sampled_lower_ids=[f"w{window}-l{i}" for i in range(lower)],
    )


def test_sampled_pairs_split_evenly_never_trip_the_contract_guard(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    # 60 % one way in every window (the worst a margin of 0.15 allows, nearly).
    setup, actions = _judge_windows(
        committed_database, control_settings, lambda w: _sampled(w, 12, 8)
    )
    assert actions == ["wait"] * WINDOWS
    assert sc.rollout(committed_database, setup.rollout_id).state == "canary"


def test_sampled_completions_the_target_favours_on_one_arm_roll_the_canary_back(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    # The spec arm's completion likelier in 19 of 20 pairs: a sampler run too cold.
    setup, actions = _judge_windows(
        committed_database, control_settings, lambda w: _sampled(w, 19, 1)
    )
    assert actions[-1] == "rollback" and len(actions) <= 3, actions
    assert sc.rollout(committed_database, setup.rollout_id).state == "rolled_back"
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.kind == "guard_output_contract"
    oc = decision.evidence["statistics"]["output_contract"]
    n = len(actions)
    assert (oc["sampled_spec_higher"], oc["sampled_spec_lower"], oc["sampled_ties"]) == (
        19 * n,
        n,
        n,
    )
    assert oc["sampled_higher_share"] == 0.95 and oc["pairs"] == 0
    assert oc["sampled_higher_test"]["alarm"] and not oc["sampled_lower_test"]["alarm"]
    assert oc["sampled_higher_test"]["allowed_rate"] == 0.65
    assert oc["sampled_higher_ids"][:2] == ["w0-h0", "w0-h1"]
    reason = decision.evidence["verdict"]["reason"]
    assert f"spec arm's completion more likely in {19 * n} of {20 * n} sampled pairs" in reason
    assert "w0-h0" in reason
    assert decision.record_markdown is not None
    assert "Output contract at T > 0" in decision.record_markdown
