"""Shared HTTP plumbing for the admin API: sessions, auth, errors, ETags, idempotency."""
