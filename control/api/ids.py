"""Path ids with the same bound as `control.ids.DbId`."""

from typing import Annotated

from fastapi import Path

from control.ids import MAX_ID, DbId

IdPath = Annotated[int, Path(ge=1, le=MAX_ID)]

__all__ = ["MAX_ID", "DbId", "IdPath"]
