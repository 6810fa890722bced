"""What a hold at the next stage's load tells the admin: where the load would be, and
what is missing to read the comparison there."""

from control.automation.gather import next_stage_advice
from control.automation.load_plan import NEXT_STAGE, LoadPlan

PLAN = LoadPlan(target=NEXT_STAGE, share_now=50.0, share_next=90.0, segment_rate_per_s=0.5)


def test_a_stage_without_a_full_block_says_so_rather_than_no_spec_requests() -> None:
    advice = next_stage_advice(
        PLAN, 1.4, None, (0.0, 10.0), None, min_samples=12, min_block_requests=10
    )
    assert advice == (
        "not enough evidence at the next stage's load yet: the spec pool would carry 1.4 "
        "requests per worker at 90 %; no block of this stage has 10 requests on each arm yet"
    )


def test_a_load_beyond_what_the_arms_saw_asks_for_a_smaller_step() -> None:
    advice = next_stage_advice(
        PLAN, 12.0, None, (0.0, 10.0), 70.0, min_samples=12, min_block_requests=10
    )
    assert advice is not None
    assert "beyond what the arms' loads so far let the comparison read (up to 10.0)" in advice
    assert "a stage at or below 70.0 %" in advice
