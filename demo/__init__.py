"""`specroute demo`: the main job end to end on embedded defaults (stack, traffic,
decisions, report). Benchmarks live in bench/."""
