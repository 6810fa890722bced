"""Simulated traffic for a rollout, shared by the decision bench and the tests.

- `traffic`: simulated requests of one arm (acceptance, latency over load, errors).
- `windows`: those requests as the telemetry window a gateway would flush.
- `rollout`: a started rollout with its own pair, pools, segment and thresholds.

Nothing here runs in the request path or the automation: `specroute bench`
(bench/decisions) and the automation tests drive the real control plane with it.
"""
