"""Alembic revisions (a package so that a wheel install ships them; Alembic skips this file)."""
