"""Response bodies of the request-record API."""

from datetime import datetime

from pydantic import ConfigDict, Field

from control.contract import RequestRecordDoc


class RequestRecord(RequestRecordDoc):
    """One request as the gateway recorded it (no prompt or completion text)."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    gateway_id: str = Field(description="The gateway process that served the request.")
    stored_at: datetime
