"""Paired checks of the output contract: one greedy request answered by both arms.

For a sampled share of a rollout's greedy (T=0, n=1) requests (`RolloutSpec.
contract_percentage`, chosen in `decide`), a copy runs on the spec pool and another on
the baseline pool, in the background, non-streamed and with `return_token_ids`; the
caller's own answer is untouched. Lossless speculation answers a greedy request with
the target's tokens, so the two answers must be equal. The comparison happens here, in
memory: telemetry gets whether the pair was equal, the first position where it differed
and, for an unequal pair, the request id; never any text.

Both copies are re-run rather than comparing the caller's answer because the relay
streams that answer frame by frame and keeps no text, and because both copies then ask
for the same thing (non-streamed, token ids). The cost is two engine requests per
check, bounded by the share and by the same in-flight cap and time budget as the
shadow's mirrors. A pair where either copy failed is counted incomplete, not compared.
"""

import asyncio
import json
import logging
import time
from typing import Any

from control.contract import PoolSnapshot
from gateway.decision.decide import Decision
from gateway.proxy.copies import BackgroundCopier
from gateway.proxy.engine_http import EngineHTTPError
from gateway.telemetry.pair_record import PairOutcome, PairRecord

log = logging.getLogger(__name__)

# One choice's completion: its token ids when the engine returned them, else its text.
Completion = tuple[int, ...] | str


def pair_body(doc: dict[str, Any]) -> bytes:
    """The caller's request, non-streamed, asking for the completion's token ids."""
    copy = {k: v for k, v in doc.items() if k not in ("stream", "stream_options")}
    return json.dumps(
        {**copy, "stream": False, "return_token_ids": True}, separators=(",", ":")
    ).encode()


def completions_of(doc: Any) -> list[Completion]:
    """Each choice's completion, in choice order; ValueError for a body without choices."""
    if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list):
        raise ValueError("no choices in the engine's answer")
    out: list[tuple[int, Completion]] = []
    for position, choice in enumerate(doc["choices"]):
        if not isinstance(choice, dict):
            raise ValueError("a choice is not an object")
        index = choice.get("index", position)
        ids = choice.get("token_ids")
        if isinstance(ids, list) and all(isinstance(t, int) for t in ids):
            out.append((index, tuple(ids)))
            continue
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else choice.get("text")
        out.append((index, text if isinstance(text, str) else ""))
    return [c for _, c in sorted(out, key=lambda pair: pair[0])]


def _first_difference(a: Completion, b: Completion) -> int | None:
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))  # one is a prefix of the other


def compare(spec: list[Completion], baseline: list[Completion]) -> PairOutcome:
    """Equal when every choice's completion is; else the first differing position
    (tokens, or characters when either side returned text only), summed over the
    choices before it."""
    if len(spec) != len(baseline):
        return PairOutcome(False, 0)
    offset = 0
    for a, b in zip(spec, baseline, strict=True):
        if type(a) is not type(b):
            # One engine returned token ids, the other text only: compare nothing finer.
            return PairOutcome(False, offset)
        diff = _first_difference(a, b)
        if diff is not None:
            return PairOutcome(False, offset + diff)
        offset += len(a)
    return PairOutcome(True, None)


class PairChecks(BackgroundCopier):
    """The gateway's paired checks; its collaborators are the shadow mirrors' own."""

    def maybe_check(
        self, decision: Decision, *, path: str, doc: dict[str, Any], request_id: str
    ) -> bool:
        """Start the check of this request if it was sampled and the cap allows."""
        if decision.pair_check is None or decision.rollout is None:
            return False
        if self.inflight >= self.max_inflight:
            self.metrics.observe_contract_pair("skipped")
            return False
        self.inflight += 1
        task = asyncio.get_running_loop().create_task(
            self._run(decision, path, pair_body(doc), request_id)
        )
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return True

    async def _run(self, decision: Decision, path: str, body: bytes, request_id: str) -> None:
        try:
            await self._check(decision, path, body, request_id)
        except Exception:
            log.exception("output contract check of %s failed", request_id)
        finally:
            self.inflight -= 1

    async def _check(self, decision: Decision, path: str, body: bytes, request_id: str) -> None:
        assert decision.pair_check is not None and decision.rollout is not None
        spec_pool, baseline_pool = decision.pair_check
        spec, baseline = await asyncio.gather(
            self._answer(spec_pool, path, body, f"{request_id}-pair-spec"),
            self._answer(baseline_pool, path, body, f"{request_id}-pair-base"),
        )
        outcome = compare(spec, baseline) if spec is not None and baseline is not None else None
        label = "incomplete" if outcome is None else "equal" if outcome.equal else "unequal"
        self.metrics.observe_contract_pair(label)
        segment = decision.segment
        self.aggregator.record_pair(
            PairRecord(
                request_id=request_id,
                segment_id=segment.id if segment is not None else None,
                pair_version_id=decision.pair_version_id,
                rollout_id=decision.rollout.id,
                finished_at=time.time(),
                outcome=outcome,
            )
        )

    async def _answer(
        self, pool: PoolSnapshot, path: str, body: bytes, copy_id: str
    ) -> list[Completion] | None:
        lease = self.balancer.acquire(pool, set())
        if lease is None:
            return None
        try:
            status, content = await self.post_copy(lease, path, body, copy_id)
            if status >= 400:
                return None  # a 5xx the breaker heard; a 4xx the copy's own fault
            return completions_of(json.loads(content))
        except TimeoutError:
            lease.breaker.release_trial()
            return None
        except (EngineHTTPError, ValueError):
            lease.breaker.record_failure()
            return None
        finally:
            lease.release()
