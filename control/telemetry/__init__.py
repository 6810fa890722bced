"""Telemetry windows from gateways: idempotent ingestion and read queries for automation."""
