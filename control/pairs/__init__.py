"""Draft–target pairs and their immutable versions."""
