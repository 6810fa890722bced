"""What the telemetry reads serve beyond the stored windows themselves."""

from pydantic import BaseModel, Field

from specwire import POSITION_LABELS
from specwire.telemetry import UNKNOWN


class PositionAcceptance(BaseModel):
    """Draft acceptance in one response-position bucket, summed over windows."""

    bucket: str = Field(
        description="Where in the response (0-based token index) the verify steps began: "
        f"{', '.join(POSITION_LABELS)}, or {UNKNOWN} (no per-step arrays, or a window "
        "from a gateway that sent no buckets)."
    )
    drafted_tokens: int = Field(ge=0, description="Draft tokens proposed in the bucket.")
    accepted_tokens: int = Field(ge=0, description="Of those, the tokens the target accepted.")
    acceptance_rate: float | None = Field(
        description="accepted_tokens / drafted_tokens; None when nothing was drafted."
    )
