"""engine.agent: the heartbeat loop beside each vLLM server.

Probes the server (health, /metrics, process memory) and reports a
`WorkerHeartbeat` to the control plane's internal API.
"""

from engine.agent.client import ControlClient, ControlClientError
from engine.agent.heartbeat import HeartbeatAgent, WorkerProbe
from engine.agent.metrics import EngineMetrics, parse_engine_metrics

__all__ = [
    "ControlClient",
    "ControlClientError",
    "EngineMetrics",
    "HeartbeatAgent",
    "WorkerProbe",
    "parse_engine_metrics",
]
