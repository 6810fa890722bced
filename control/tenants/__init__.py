"""Tenants, their API keys and admin tokens (all stored hashed)."""
