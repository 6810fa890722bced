"""Open the engine request on one pool: pick a worker, send, try the next.

Connect failures, 5xx and other answers that are neither a 2xx nor an engine's
refusal of the request (a redirect, a 418) count
against the worker's breaker and move on to the next usable worker of the
pool; when none is left the pipeline's route step may go to the decision's
fallback pool (reason `pool_unavailable`). Once the engine has accepted the
request (2xx headers) nothing is retried: the relay owns it from there.

A worker that took the request and went silent (no headers by the
response-header timeout, or its host stopped acknowledging: a partition) counts
against its breaker too, its idle connections are dropped, and the request goes
once more to another worker; a second silent one ends the pool (typed 504
`engine_unresponsive` unless the fallback pool takes it). Nothing had reached the
client, so nothing is sent twice to it.
"""

import json
import logging
import re
from dataclasses import dataclass

from gateway.decision.decide import Decision
from gateway.errors import (
    GatewayError,
    ServiceUnavailable,
    UpstreamClientError,
    UpstreamError,
    UpstreamTimeout,
)
from gateway.proxy.engine_http import (
    EngineBodyTooLarge,
    EngineClient,
    EngineHTTPError,
    EngineResponse,
    EngineUnresponsive,
)
from gateway.routing.balancer import Balancer, Lease

log = logging.getLogger(__name__)


@dataclass
class Opened:
    decision: Decision
    lease: Lease
    response: EngineResponse


# Engine statuses that say the request itself is wrong: relayed with their status.
# Any other 4xx (401, 403, 405, 418, ...) is a misconfigured worker: a 502.
RELAYED_CLIENT_STATUSES = frozenset({400, 404, 413, 422})
# What an engine's error body is read up to: enough for any message, never a 48 MiB one.
ERROR_BODY_LIMIT = 64 * 1024
_NAMED_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_CLIENT_CODES = {404: "model_not_found", 413: "payload_too_large"}


def _client_code(raw: object, message: str, status: int) -> str:
    """A named code for an engine's refusal: the engine's own when it is one
    (``context_length_exceeded``), else one named for what happened (vLLM sends its
    status number, ``"code": 400``)."""
    if isinstance(raw, str) and _NAMED_CODE.fullmatch(raw):
        return raw
    if "context length" in message.lower():
        return "context_length_exceeded"
    return _CLIENT_CODES.get(status, UpstreamClientError.default_code)


def _engine_error(resp_body: bytes, status: int) -> GatewayError:
    message, raw_code = f"engine returned {status}", None
    try:
        doc = json.loads(resp_body)
        err = doc.get("error", doc) if isinstance(doc, dict) else {}
        if isinstance(err, dict):
            message = str(err.get("message") or message)[:2000]
            raw_code = err.get("code")
    except (ValueError, RecursionError):
        pass
    details = {"engine_status": status}
    if status in RELAYED_CLIENT_STATUSES:
        return UpstreamClientError(
            message, status_code=status, code=_client_code(raw_code, message, status)
        )
    if status == 503 or status == 429:
        return ServiceUnavailable(
            f"engine overloaded: {message}", code="engine_unavailable", details=details
        )
    if status < 500:
        # A redirect, an informational answer or a 4xx no OpenAI engine sends for a
        # completion (418, 401): the worker is misconfigured (counted like a 5xx).
        return UpstreamError(
            f"engine answered {status} instead of a completion: {message}",
            code="unexpected_engine_status",
            details=details,
        )
    return UpstreamError(message, code="engine_error", details=details)


class PoolExhausted(Exception):
    """No worker of the pool took the request, and nothing was sent that could complete:
    the caller may go to another pool. `error` is the last worker's failure (None: the
    pool had no usable worker at all)."""

    def __init__(self, error: GatewayError | None) -> None:
        super().__init__(str(error) if error else "no usable worker")
        self.error = error


async def open_on_pool(
    *,
    client: EngineClient,
    balancer: Balancer,
    decision: Decision,
    path: str,
    body: bytes,
    request_id: str,
    header_timeout_s: float,
    response_header_timeout_s: float | None = None,
) -> Opened:
    """Open the request on a usable worker of the decision's pool, trying each in turn.

    `header_timeout_s` is the request's own wait for the engine's headers (a 504);
    `response_header_timeout_s`, shorter, says a worker went silent (streams only:
    a non-streamed answer's headers come with its end).

    Raises PoolExhausted when every worker was unusable, unreachable or failed
    (5xx, a redirect), or two were silent; an engine's 4xx and a timeout are the
    request's own and raise their typed error, tagged with the decision."""
    headers = {"content-type": "application/json", "x-request-id": request_id}
    last_error: GatewayError | None = None
    tried: set[str] = set()
    silent = 0
    version = decision.pair.engine_version if decision.pair is not None else None
    while (lease := balancer.acquire(decision.pool, tried, version)) is not None:
        tried.add(lease.worker.id)
        base = engine_base(lease.worker.endpoint_url)
        try:
            response = await client.post(
                base,
                path,
                body,
                headers,
                timeout_s=header_timeout_s,
                header_timeout_s=response_header_timeout_s,
            )
        except EngineUnresponsive as exc:
            # Nothing of an answer came, so nothing reached the client: another worker
            # may take it. The host's other pooled connections are as dead as this one.
            lease.breaker.record_failure()
            lease.release()
            client.drop_idle(base)
            log.warning("engine %s is unresponsive: %s", lease.worker.id, exc)
            last_error = UpstreamTimeout(
                "The engine did not answer (its host is unresponsive)",
                code="engine_unresponsive",
            )
            silent += 1
            if silent >= 2:
                break  # retried once: each silent worker costs a whole timeout
            continue
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
            raise tagged(UpstreamTimeout("The engine did not answer in time"), decision) from exc
        except BaseException:
            lease.breaker.release_trial()
            lease.release()
            raise
        if 200 <= response.status < 300:
            return Opened(decision=decision, lease=lease, response=response)
        try:
            content = await response.read(
                limit=ERROR_BODY_LIMIT, deadline=response.deadline(header_timeout_s)
            )
        except (EngineHTTPError, EngineBodyTooLarge, TimeoutError):
            content = b""
        finally:
            response.release()
        error = _engine_error(content, response.status)
        if response.status in RELAYED_CLIENT_STATUSES or response.status == 429:
            # The engine is fine; the request is not. Neither a fault nor a retry.
            lease.breaker.record_success()
            lease.release()
            raise tagged(error, decision)
        lease.breaker.record_failure()
        lease.release()
        log.warning("engine %s answered %d", lease.worker.id, response.status)
        last_error = error
    raise PoolExhausted(last_error)


def engine_base(endpoint_url: str) -> str:
    """Workers register their server root; tolerate one registered with the /v1 suffix."""
    base = endpoint_url.rstrip("/")
    return base.removesuffix("/v1")


def tagged(error: GatewayError, decision: Decision) -> GatewayError:
    """The error response names the decision in effect when it happened (after any fallback)."""
    error.headers["x-specroute-decision"] = decision.header()
    return error
