"""Engine workers: heartbeats (registration, health, memory pressure) and staleness."""
