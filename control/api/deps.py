"""Request-scoped dependencies: the database, one session per request, settings."""

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from control.db import Database
from control.settings import ControlSettings


def get_database(request: Request) -> Database:
    database: Database = request.app.state.database
    return database


def get_control_settings(request: Request) -> ControlSettings:
    settings: ControlSettings = request.app.state.settings
    return settings


def get_session(database: Annotated[Database, Depends(get_database)]) -> Iterator[Session]:
    """Commit when the endpoint returns, roll back when it raises.

    Used with scope="function" so the commit happens before the response is
    sent: a failed commit becomes an error response, never a lost 200.
    """
    with database.session() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SettingsDep = Annotated[ControlSettings, Depends(get_control_settings)]
