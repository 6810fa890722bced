"""Several gateway processes on one port (`specroute gateway serve --workers N`).

uvicorn's supervisor starts N processes that share the listening socket; each
builds its own app here. What they share, and how:

- **/metrics**: prometheus-client's multi-process mode. Every process writes its
  samples to memory-mapped files in one directory (PROMETHEUS_MULTIPROC_DIR, set
  by `serve` before the workers start and emptied at each start), and whichever
  process answers a scrape renders all of them through a MultiProcessCollector:
  counters and histograms summed, each gauge by its own rule (see
  gateway.metrics). One scrape target per host, whatever N is.
- **Telemetry**: each process aggregates and flushes its own windows under its
  own gateway id (the default `gw-<host>-<pid>`, or `<SPECROUTE_GATEWAY_GATEWAY_ID>-<pid>`),
  so control's (gateway id, window start) idempotency keeps every process's
  windows apart and stores each request once.
- **Quotas**: the Redis limiter (SPECROUTE_GATEWAY_REDIS_URL), shared by the
  processes as by replicas on several hosts; `serve` refuses N > 1 without it
  unless told `--local-quotas`.
"""

import os

from fastapi import FastAPI


def worker_gateway_id(configured: str | None, pid: int) -> str | None:
    """A worker's telemetry id: the configured id with its pid appended (N processes
    must not share one), or None for the default, which has the pid already."""
    # NOTE: the contract's 200 characters hold the suffix too.
    return None if configured is None else f"{configured[:180]}-{pid}"


def create_worker_app() -> FastAPI:
    """The app one of `serve --workers N`'s processes serves (uvicorn's factory)."""
    from gateway.app import create_app
    from gateway.settings import GatewaySettings

    settings = GatewaySettings()
    if "gateway_id" in settings.model_fields_set:
        gateway_id = worker_gateway_id(settings.gateway_id, os.getpid())
        settings = settings.model_copy(update={"gateway_id": gateway_id})
    return create_app(settings)
