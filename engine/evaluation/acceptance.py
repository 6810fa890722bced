"""Where `engine evaluate` reads acceptance from: each case's own per-request metrics,
or, from an engine that sends none, its Prometheus counters over the whole run.

vLLM sends per-request speculative metrics (an acceptance histogram in the final
chunk) only when started with `--per-request-spec-decode-metrics`. Without it, a
speculating vLLM still exports cumulative counters on /metrics:
`vllm:spec_decode_num_drafts_total` (verification steps) and
`vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}` (steps that
accepted position i, 0-based), read by engine.agent.metrics. Acceptance is a
prefix, so their difference over the run is the run's histogram exactly:

    a_0 = steps, a_i = accepted at position i - 1 (i = 1..k), a_(k+1) = 0
    h_j = a_j - a_(j+1)   (steps that accepted exactly j drafts)

The aggregates (position acceptance, mean acceptance length, expected speedup)
are then exact for every request the engine ran during the run, so the engine
must serve nothing else meanwhile: where every case completed, the tokens it
generated (`vllm:generation_tokens_total`) must be the cases' completion tokens,
else the run stops. Per label slices and each case's acceptance are not
measured; the evaluation says `acceptance_source` `engine_counters` and its case
results carry null drafts.

A case that fails part way may have run steps the counters hold. With the cases run
one at a time (`--concurrency 1`), `FailedCaseWork` reads the counters
around each case and the failed cases' own steps and tokens are subtracted, so the
aggregate is exactly the completed cases'; at higher concurrency the evaluation's
note says their work, if any, is in the counters.

The source is decided on the first case that completes, run alone before the
others: its per-request metrics, else the counters read before it, else the
command stops with `NoAcceptanceSource` naming the flag.
"""

import dataclasses

import httpx

from engine.agent.metrics import EngineMetrics, parse_engine_metrics
from engine.evaluation.measure import Tally
from engine.evaluation.run import CaseRun, EvaluationError
from specwire import SpecCounters

PER_REQUEST = "per_request"
ENGINE_COUNTERS = "engine_counters"
FLAG = "--per-request-spec-decode-metrics detailed"  # as engine.pools.launcher starts them


class NoAcceptanceSource(EvaluationError):
    """The engine sends no per-request speculative metrics and exports no usable
    spec-decode counters: nothing to read acceptance from."""


def read_metrics(engine_url: str) -> EngineMetrics | None:
    """The engine's /metrics, parsed; None where it serves none."""
    try:
        response = httpx.get(engine_url.rstrip("/") + "/metrics", timeout=10.0)
        if response.is_error:
            return None
        return parse_engine_metrics(response.text)
    except (httpx.HTTPError, ValueError):
        return None


def usable_counters(metrics: EngineMetrics | None, k: int) -> SpecCounters | None:
    """The spec-decode counters, where they give the acceptance per position (k)."""
    if metrics is None or metrics.spec is None or len(metrics.spec.accepted_per_position) < k:
        return None
    return metrics.spec


@dataclasses.dataclass
class SourceProbe:
    """`run_all`'s probe: decides the source on the first completed case."""

    engine_url: str
    k: int
    counters: SpecCounters | None  # read before the first case
    source: str | None = None  # None: no case completed

    def __call__(self, run: CaseRun) -> None:
        if run.histogram is not None:
            self.source = PER_REQUEST
        elif self.counters is not None:
            self.source = ENGINE_COUNTERS
        else:
            raise NoAcceptanceSource(
                f"engine {self.engine_url} gives no acceptance to measure: its responses "
                "carry no per-request speculative metrics and its /metrics has no "
                "vllm:spec_decode_num_drafts_total and "
                f"vllm:spec_decode_num_accepted_tokens_per_pos_total for {self.k} positions; "
                f"start it speculating with {FLAG}"
            )


def settle(runs: list[CaseRun], source: str | None) -> list[CaseRun]:
    """The runs as the source reads them: per request, a completed case without its
    metrics fails (the engine stopped sending them); from counters, no case has a
    histogram."""
    if source == ENGINE_COUNTERS:
        return [dataclasses.replace(r, histogram=None) for r in runs]
    missing = "the engine sent no per-request speculative metrics for this case"
    return [CaseRun.failed(missing) if r.error is None and r.histogram is None else r for r in runs]


@dataclasses.dataclass
class FailedCaseWork:
    """What the cases that failed moved the engine's counters by, each read around its
    own run: a failed case can have run some steps before its error, which the run's
    counters hold but no aggregate of the completed cases should. Only where the cases
    run one at a time (`--concurrency 1`), so that nothing else moves them meanwhile.

    `known` turns False where a failed case's counters could not be read (the engine
    went away): its work is then in the counters, and the evaluation says so. Once
    `probe` has read acceptance from the cases' own metrics, nothing is read."""

    probe: SourceProbe
    steps: int = 0
    per_position: list[int] = dataclasses.field(default_factory=list)
    generated: int = 0
    failed: int = 0
    known: bool = True
    _before: EngineMetrics | None = None

    def __post_init__(self) -> None:
        self.per_position = self.per_position or [0] * self.probe.k

    def before(self) -> None:
        if self.probe.source != PER_REQUEST:
            self._before = read_metrics(self.probe.engine_url)

    def after(self, run: CaseRun) -> None:
        if run.error is None or self.probe.source == PER_REQUEST:
            return
        self.failed += 1
        k = self.probe.k
        after = read_metrics(self.probe.engine_url)
        start, end = usable_counters(self._before, k), usable_counters(after, k)
        if start is None or end is None or self._before is None or after is None:
            self.known = False
            return
        self.steps += end.num_drafts - start.num_drafts
        for i in range(k):
            self.per_position[i] += end.accepted_per_position[i] - start.accepted_per_position[i]
        if self._before.generation_tokens is not None and after.generation_tokens is not None:
            self.generated += after.generation_tokens - self._before.generation_tokens
        else:
            self.known = False


def counter_tally(
    before: SpecCounters,
    after: SpecCounters,
    k: int,
    cases: int,
    failed: FailedCaseWork | None = None,
) -> Tally:
    """The run's acceptance histogram from the counters' difference, less what the
    failed cases moved them by where that is known."""
    steps = after.num_drafts - before.num_drafts
    per_position = [
        after.accepted_per_position[i] - before.accepted_per_position[i] for i in range(k)
    ]
    if failed is not None and failed.known:
        steps -= failed.steps
        per_position = [n - f for n, f in zip(per_position, failed.per_position, strict=True)]
    if steps < 0 or any(n < 0 for n in per_position):
        raise EvaluationError(
            "the engine's spec-decode counters went backwards during the evaluation "
            "(did it restart?): no acceptance to report"
        )
    reached = [steps, *per_position, 0]
    histogram = [reached[j] - reached[j + 1] for j in range(k + 1)]
    if any(n < 0 for n in histogram):
        raise EvaluationError(
            f"the engine's per-position accepted counters {per_position} over {steps} steps "
            "are not a prefix acceptance: cannot read a histogram from them"
        )
    return Tally(cases=cases, histogram=histogram)


def check_only_these_cases(
    before: EngineMetrics,
    after: EngineMetrics,
    runs: list[CaseRun],
    failed: FailedCaseWork | None = None,
) -> str | None:
    """Raise where the engine generated more tokens than the completed cases received,
    the failed cases' own work aside (another client shared it: the counters cover its
    requests too). A note where it cannot tell (a case failed part way with its work
    not read around it, or no generation counter), else None."""
    if before.generation_tokens is None or after.generation_tokens is None:
        return "the engine exports no vllm:generation_tokens_total: other traffic unchecked"
    generated = after.generation_tokens - before.generation_tokens
    if any(r.error is not None for r in runs):
        if failed is None or not failed.known:
            return (
                "a case failed: its partial work, if any, is in the counters "
                "(--concurrency 1 reads it around each case and leaves it out)"
            )
        generated -= failed.generated
    received = sum(r.completion_tokens for r in runs)
    if generated > received:
        raise EvaluationError(
            f"the engine generated {generated} tokens during the evaluation but its cases "
            f"received {received}: another client used it, and its counters cover those "
            f"requests too; rerun on an engine serving only the evaluation, or with {FLAG}"
        )
    return None
