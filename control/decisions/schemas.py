"""Response bodies of the decisions API."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Decision(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    rollout_id: int
    kind: str
    from_state: str
    to_state: str
    from_percentage: float
    to_percentage: float
    rollout_version: int
    evidence: dict[str, Any]
    threshold_set_id: int | None
    actor: str
    task_id: str | None
    has_record: bool = Field(description="A Markdown record is at /decisions/{id}/record.")
    created_at: datetime

    @classmethod
    def of(cls, row: Any) -> "Decision":
        return cls.model_validate(
            {
                **{f: getattr(row, f) for f in cls.model_fields if f != "has_record"},
                "has_record": row.record_markdown is not None,
            }
        )
