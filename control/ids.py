"""Database ids bounded to what every backend's INTEGER holds, so an absurd id is a
422 from validation rather than an overflow inside the driver."""

from typing import Annotated

from pydantic import Field

MAX_ID = 2_147_483_647

DbId = Annotated[int, Field(ge=1, le=MAX_ID)]
