"""Shadow mirroring: a copy of a sampled request goes to the spec pool, unseen.

The caller is served by the baseline arm as if nothing else happened; the copy
runs in the background, non-streamed, and its response is read for usage and
speculative metrics, then discarded. It is never charged to the tenant's quota.
A copy that runs past `shadow_budget_s` is cancelled (its connection closed, so
the engine aborts it), and at most `shadow_max_inflight` copies run at once per
gateway: a mirror beyond the cap is skipped, which caps the shadow's load on the
spec pool. Each copy becomes a telemetry record of the rollout's spec arm
(reason `shadow_mirror`), judged by the automation against the baseline requests
it copies.
"""

import asyncio
import json
import logging
import time
from typing import Any

from gateway.decision.decide import Decision
from gateway.decision.reasons import DecisionReason as R
from gateway.proxy.copies import BackgroundCopier, CopyDeps
from gateway.proxy.engine_http import EngineHTTPError
from gateway.proxy.records import request_record
from gateway.proxy.relay import RelayResult
from gateway.proxy.sanitize import NO_SPEC, spec_stats, usage_of
from gateway.routing.balancer import Lease
from specwire import Arm, TenantSpec

log = logging.getLogger(__name__)


def mirror_body(doc: dict[str, Any]) -> bytes:
    """The caller's request, non-streamed: usage and speculative metrics come in the body."""
    copy = {k: v for k, v in doc.items() if k not in ("stream", "stream_options")}
    return json.dumps({**copy, "stream": False}, separators=(",", ":")).encode()


class ShadowMirrors(BackgroundCopier):
    """The gateway's mirrors: it takes its collaborators, not the whole gateway state."""

    def __init__(self, deps: CopyDeps) -> None:
        super().__init__(deps)
        self.sent = 0
        self.skipped = 0

    def maybe_mirror(
        self,
        decision: Decision,
        *,
        path: str,
        doc: dict[str, Any],
        request_id: str,
        tenant: TenantSpec,
    ) -> bool:
        """Start the mirror of this request if it was sampled and the cap allows."""
        if decision.mirror is None:
            return False
        if self.inflight >= self.max_inflight:
            self.skipped += 1
            self.metrics.observe_shadow("skipped")
            return False
        self.inflight += 1
        self.sent += 1
        task = asyncio.get_running_loop().create_task(
            self._run(decision, path, mirror_body(doc), request_id, tenant)
        )
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return True

    async def _run(
        self,
        decision: Decision,
        path: str,
        body: bytes,
        request_id: str,
        tenant: TenantSpec,
    ) -> None:
        try:
            await self._mirror(decision, path, body, request_id, tenant)
        except Exception:
            log.exception("shadow mirror of %s failed", request_id)
        finally:
            self.inflight -= 1

    async def _mirror(
        self,
        decision: Decision,
        path: str,
        body: bytes,
        request_id: str,
        tenant: TenantSpec,
    ) -> None:
        assert decision.mirror is not None
        started = time.monotonic()
        lease = self.balancer.acquire(decision.mirror, set())
        if lease is None:
            self.metrics.observe_shadow("no_worker")
            return
        result = RelayResult()
        mirror_id = f"{request_id}-shadow"
        try:
            status, content = await self.post_copy(lease, path, body, mirror_id)
            if status >= 500:
                result.outcome, result.http_status = "error", status
            elif status >= 400:
                result.outcome, result.http_status = "client_error", status
            else:
                doc = json.loads(content)
                result.usage = usage_of(doc)
                result.spec = spec_stats(doc) or NO_SPEC
        except TimeoutError:
            lease.breaker.release_trial()
            result.outcome, result.http_status = "cancelled", 499
        except (EngineHTTPError, ValueError):
            lease.breaker.record_failure()
            result.outcome, result.http_status = "error", 502
        finally:
            lease.release()
        self.metrics.observe_shadow(result.outcome)
        self._record(decision, lease, result, mirror_id, tenant, started)

    def _record(
        self,
        decision: Decision,
        lease: Lease,
        result: RelayResult,
        mirror_id: str,
        tenant: TenantSpec,
        started: float,
    ) -> None:
        rollout = decision.rollout
        rec = request_record(
            result,
            request_id=mirror_id,
            tenant=tenant.name,
            decision=decision,
            lease=lease,
            started=started,
            arm=Arm.SPEC,
            reason=str(R.SHADOW_MIRROR),
            rollout_id=rollout.id if rollout else None,
        )
        # NOTE: telemetry only: no quota charge, and not a served request in the metrics.
        self.aggregator.record(rec)
