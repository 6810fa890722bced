"""Accepted draft tokens are a subset of the drafted ones: the validators saying so.

Shared by the telemetry window (`specwire.telemetry`) and the per-request record
(`specwire.requests`), so both refuse the same inconsistency the same way: a
`PydanticCustomError` on the accepted field, which control answers with a 422
naming it. Documents read back from storage validate with `{STORED: True}`:
rows stored before a check existed read as they were stored.
"""

from collections.abc import Sequence

from pydantic import ValidationInfo
from pydantic_core import PydanticCustomError

# Validation context (`{STORED: True}`) of documents read back from storage.
STORED = "stored"


def is_stored(info: ValidationInfo) -> bool:
    return isinstance(info.context, dict) and info.context.get(STORED) is True


def at_most_drafted(accepted: int, info: ValidationInfo) -> int:
    """`accepted_tokens` counts a subset of `drafted_tokens` (validated before it)."""
    drafted = info.data.get("drafted_tokens")
    if drafted is not None and accepted > drafted and not is_stored(info):
        raise PydanticCustomError(
            "accepted_exceeds_drafted",
            "accepted_tokens ({accepted}) exceeds drafted_tokens ({drafted})",
            {"accepted": accepted, "drafted": drafted},
        )
    return accepted


def first_position_over_drafts(per_position: Sequence[int], drafts: int) -> int | None:
    """The first draft position accepted more often than there were drafts, or None.

    `accepted_per_position[j]` counts the draft proposals (target passes) that accepted
    position j: at most one per proposal, so at most `drafts`."""
    return next((j for j, n in enumerate(per_position) if n > drafts), None)


def positions_at_most_drafts(per_position: list[int], info: ValidationInfo) -> list[int]:
    """`accepted_per_position` counts proposals out of `drafts` (validated before it)."""
    drafts = info.data.get("drafts")
    if drafts is None or is_stored(info):
        return per_position
    j = first_position_over_drafts(per_position, drafts)
    if j is not None:
        raise PydanticCustomError(
            "accepted_exceeds_drafts",
            "accepted_per_position[{position}] ({accepted}) exceeds drafts ({drafts})",
            {"position": j, "accepted": per_position[j], "drafts": drafts},
        )
    return per_position
