"""Versioned threshold sets: a change is a new version of the same name."""
