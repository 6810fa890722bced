"""Paired checks of the output contract: one request answered by both arms.

For a sampled share of a rollout's single-choice requests (`RolloutSpec.
contract_percentage`, chosen in `decide`), a copy runs on the spec pool and another on
the baseline pool, in the background and non-streamed; the caller's own answer is
untouched. The comparison happens here, in memory, and telemetry keeps counts and
request ids, never any text.

- **Greedy (T=0)**: the copies ask for `return_token_ids`. Lossless speculation answers
  a greedy request with the target's tokens, so the two answers must be equal;
  telemetry gets whether they were, the first position where they differed and, for
  an unequal pair, the request id.
- **Sampled (T > 0)**: the copies drop any `seed` (so the two draws are independent)
  and ask for the sampled tokens' log-probabilities, which vLLM computes from the
  target's logits on either arm. Lossless speculation samples from the target's
  distribution, so the two completions are exchangeable: the spec arm's mean
  log-probability (over the tokens after the first, which the target's prefill
  samples on both arms alike) is above the baseline's as often as below it. Telemetry
  gets which arm was higher; the control plane's guard tests the split against 1/2.

Both copies are re-run rather than comparing the caller's answer because the relay
streams that answer frame by frame and keeps no text, and because both copies then ask
for the same thing. The cost is two engine requests per check, bounded by the share
and by the same in-flight cap and time budget as the shadow's mirrors. A pair where
either copy failed is counted incomplete, not compared.
"""

import asyncio
import json
import logging
import math
import time
from typing import Any

from gateway.decision.decide import Decision
from gateway.proxy.copies import BackgroundCopier
from gateway.proxy.engine_http import EngineHTTPError
from gateway.telemetry.pair_record import PairOutcome, PairRecord, SampledOutcome
from specwire import PoolSnapshot

log = logging.getLogger(__name__)

# One choice's completion: its token ids when the engine returned them, else its text.
Completion = tuple[int, ...] | str


def is_greedy(doc: dict[str, Any]) -> bool:
    """Whether the request asks for greedy decoding (T=0; no temperature is the
    engine's default, which samples)."""
    return doc.get("temperature") == 0


def pair_body(doc: dict[str, Any]) -> bytes:
    """The caller's request, non-streamed, asking for the completion's token ids; a
    sampled one also without its seed and with the sampled tokens' log-probabilities."""
    copy = {k: v for k, v in doc.items() if k not in ("stream", "stream_options")}
    extra: dict[str, Any] = {"stream": False, "return_token_ids": True}
    if not is_greedy(doc):
        copy.pop("seed", None)
        if "messages" in doc:
            extra["logprobs"] = True
        else:
            extra["logprobs"] = copy.pop("logprobs", None) or 0
    return json.dumps({**copy, **extra}, separators=(",", ":")).encode()


def sampled_logprobs_of(doc: Any) -> list[float]:
    """The first choice's sampled-token log-probabilities (a completions or a chat
    answer); ValueError where the answer carries none."""
    if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list):
        raise ValueError("no choices in the engine's answer")
    choice = next(
        (c for c in doc["choices"] if isinstance(c, dict) and c.get("index", 0) == 0), None
    )
    logprobs = choice.get("logprobs") if choice is not None else None
    if not isinstance(logprobs, dict):
        raise ValueError("no logprobs in the engine's answer")
    if isinstance(logprobs.get("token_logprobs"), list):
        values = logprobs["token_logprobs"]
    elif isinstance(logprobs.get("content"), list):
        values = [t.get("logprob") if isinstance(t, dict) else None for t in logprobs["content"]]
    else:
        raise ValueError("no token log-probabilities in the engine's answer")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise ValueError("a token log-probability is not a number")
    return [float(v) for v in values]


def compare_sampled(spec: list[float], baseline: list[float]) -> SampledOutcome:
    """Which completion the target found likelier: the sign of the difference of the
    mean log-probabilities of the tokens after the first (0: a tie, or a completion of
    one token, which carries nothing speculation sampled)."""
    a, b = spec[1:], baseline[1:]
    if not a or not b:
        return SampledOutcome(0)
    d = math.fsum(a) / len(a) - math.fsum(b) / len(b)
    if math.isnan(d):
        return SampledOutcome(0)
    return SampledOutcome((d > 0) - (d < 0))


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
            self._run(decision, path, pair_body(doc), request_id, is_greedy(doc))
        )
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return True

    async def _run(
        self, decision: Decision, path: str, body: bytes, request_id: str, greedy: bool
    ) -> None:
        try:
            await self._check(decision, path, body, request_id, greedy)
        except Exception:
            log.exception("output contract check of %s failed", request_id)
        finally:
            self.inflight -= 1

    async def _check(
        self, decision: Decision, path: str, body: bytes, request_id: str, greedy: bool
    ) -> None:
        assert decision.pair_check is not None and decision.rollout is not None
        spec_pool, baseline_pool = decision.pair_check
        spec, baseline = await asyncio.gather(
            self._answer(spec_pool, path, body, f"{request_id}-pair-spec"),
            self._answer(baseline_pool, path, body, f"{request_id}-pair-base"),
        )
        outcome = _outcome(spec, baseline, greedy=greedy)
        self.metrics.observe_contract_pair(_label(outcome))
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

    async def _answer(self, pool: PoolSnapshot, path: str, body: bytes, copy_id: str) -> Any:
        """The copy's parsed answer; None where it failed."""
        lease = self.balancer.acquire(pool, set())
        if lease is None:
            return None
        try:
            status, content = await self.post_copy(lease, path, body, copy_id)
            if status >= 400:
                return None  # a 5xx the breaker heard; a 4xx the copy's own fault
            return json.loads(content)
        except TimeoutError:
            lease.breaker.release_trial()
            return None
        except (EngineHTTPError, ValueError):
            lease.breaker.record_failure()
            return None
        finally:
            lease.release()


def _outcome(spec: Any, baseline: Any, *, greedy: bool) -> PairOutcome | SampledOutcome | None:
    """The pair's comparison; None when an arm failed or answered without what the
    comparison needs."""
    if spec is None or baseline is None:
        return None
    try:
        if greedy:
            return compare(completions_of(spec), completions_of(baseline))
        return compare_sampled(sampled_logprobs_of(spec), sampled_logprobs_of(baseline))
    except ValueError:
        return None


def _label(outcome: PairOutcome | SampledOutcome | None) -> str:
    if outcome is None:
        return "incomplete"
    if isinstance(outcome, SampledOutcome):
        return {1: "sampled_spec_higher", -1: "sampled_spec_lower", 0: "sampled_tie"}[outcome.sign]
    return "equal" if outcome.equal else "unequal"
