"""Decisions: every rollout flip with its evidence, and their decision records."""
