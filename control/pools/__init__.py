"""Engine pools: a target plus an optional pair version (none = baseline)."""
