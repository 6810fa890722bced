"""Open the engine request: pick a worker, send, fall back before the first byte.

Connect failures, 5xx and other non-2xx, non-4xx answers (a redirect) count
against the worker's breaker and move
on to the next usable worker of the pool, then to the decision's fallback
pool (reason `pool_unavailable`). Once the engine has accepted the request
(2xx headers) nothing is retried: the relay owns it from there.
"""

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from gateway.decision.decide import Decision
from gateway.errors import (
    GatewayError,
    ServiceUnavailable,
    UpstreamClientError,
    UpstreamError,
    UpstreamTimeout,
)
from gateway.proxy.engine_http import EngineClient, EngineHTTPError, EngineResponse
from gateway.routing.balancer import Balancer, Lease

log = logging.getLogger(__name__)


@dataclass
class Opened:
    decision: Decision
    lease: Lease
    response: EngineResponse


def _engine_error(resp_body: bytes, status: int) -> GatewayError:
    message, code = f"engine returned {status}", None
    try:
        doc = json.loads(resp_body)
        err = doc.get("error", doc) if isinstance(doc, dict) else {}
        if isinstance(err, dict):
            message = str(err.get("message") or message)[:2000]
            code = str(err["code"]) if err.get("code") is not None else None
    except ValueError:
        pass
    if 400 <= status < 500 and status != 429:
        return UpstreamClientError(message, status_code=status, code=code)
    if status == 503 or status == 429:
        return ServiceUnavailable(f"engine overloaded: {message}", code="engine_unavailable")
    if status < 400:
        # A redirect or an informational answer: no OpenAI engine sends one for a
        # completion, so the worker is misconfigured (counted like a 5xx).
        return UpstreamError(
            f"engine answered {status} instead of a completion: {message}",
            code="unexpected_engine_status",
        )
    return UpstreamError(message, code="engine_error")


async def open_upstream(
    *,
    client: EngineClient,
    balancer: Balancer,
    decision: Decision,
    path: str,
    body: bytes,
    request_id: str,
    header_timeout_s: float,
    on_fallback: Callable[[Decision], None] | None = None,
) -> Opened:
    """Open the request on the decision's pool, or on its fallback pool if that has no
    usable worker; `on_fallback` hears of the switch before anything is sent there."""
    headers = {"content-type": "application/json", "x-request-id": request_id}
    last_error: GatewayError = ServiceUnavailable(
        f"No healthy worker in pool '{decision.pool.name}'", code="no_healthy_worker"
    )
    current: Decision | None = decision
    while current is not None:
        tried: set[str] = set()
        version = current.pair.engine_version if current.pair is not None else None
        while (lease := balancer.acquire(current.pool, tried, version)) is not None:
            tried.add(lease.worker.id)
            try:
                async with asyncio.timeout(header_timeout_s):
                    response = await client.post(
                        _engine_base(lease.worker.endpoint_url), path, body, headers
                    )
            except EngineHTTPError as exc:
                # Before any answer: the engine is unreachable or died, so sending the
                # request elsewhere cannot duplicate work that will complete.
                lease.breaker.record_failure()
                lease.release()
                last_error = ServiceUnavailable(
                    f"Worker unreachable ({type(exc).__name__})", code="engine_unreachable"
                )
                continue
            except TimeoutError as exc:
                lease.breaker.release_trial()
                lease.release()
                raise _tagged(
                    UpstreamTimeout("The engine did not answer in time"), current
                ) from exc
            except BaseException:
                lease.breaker.release_trial()
                lease.release()
                raise
            if 200 <= response.status < 300:
                return Opened(decision=current, lease=lease, response=response)
            try:
                async with asyncio.timeout(header_timeout_s):
                    content = await response.read()
            except (EngineHTTPError, TimeoutError):
                content = b""
            finally:
                response.release()
            error = _engine_error(content, response.status)
            if 400 <= response.status < 500:
                # The engine is fine; the request is not. Neither a fault nor a retry.
                lease.breaker.record_success()
                lease.release()
                raise _tagged(error, current)
            lease.breaker.record_failure()
            lease.release()
            log.warning("engine %s answered %d", lease.worker.id, response.status)
            last_error = error
        last_error = _tagged(last_error, current)
        current = current.fall_back() if current.fallback is not None else None
        if current is not None and on_fallback is not None:
            on_fallback(current)
    raise last_error


def _engine_base(endpoint_url: str) -> str:
    """Workers register their server root; tolerate one registered with the /v1 suffix."""
    base = endpoint_url.rstrip("/")
    return base.removesuffix("/v1")


def _tagged(error: GatewayError, decision: Decision) -> GatewayError:
    """The error response names the decision in effect when it happened (after any fallback)."""
    error.headers["x-specroute-decision"] = decision.header()
    return error
