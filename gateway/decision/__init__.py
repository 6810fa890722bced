"""Pure per-request decision: features, segment, rollout, cohort, compatibility."""
