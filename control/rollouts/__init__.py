"""Rollouts: binding a segment to a pair version, with stages and a state machine."""
