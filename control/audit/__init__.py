"""Audit trail of every mutation."""
