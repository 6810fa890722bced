"""Whether a telemetry window's buckets agree with its totals.

A window's parts count subsets of its requests and tokens; control refuses a window
whose parts do not fit (POST /internal/v1/telemetry answers 422 naming the field).
Each rule is what the gateway's aggregator produces by construction
(`gateway.telemetry.aggregator`), so a real gateway never trips one:

- outcomes: errors + client_errors + cancellations <= requests (one outcome each);
- accepted_per_position[j] <= drafts (a proposal accepts position j at most once);
- every latency histogram holds at most requests - client_errors samples: a client
  error has no latency; any other request at most one sample per histogram, and
  fewer is legitimate (an arm error before the first token has no ttft, a request
  with 0 or 1 completion tokens no tpot, one with none no e2e_per_token);
- a request with a ttft, a tpot or an e2e_per_token sample also has an e2e sample,
  a tpot sample needs a ttft sample, and each e2e_per_token sample a completion token;
- load slices: each slice's histograms hold at most its requests; its load_sum lies in
  its load bucket's range times its requests; the slices' requests add up to
  load.dispatched exactly, which is at most requests - client_errors (a request that
  reached no worker, or a client error, is in no slice); the slices' samples are
  among the window's own;
- request_acceptance counts requests and accepted tokens of the window;
- by_response_position, when present, adds up to drafted_tokens and accepted_tokens
  exactly (empty from gateways that send no buckets).

The rules are ingestion's only: windows read back from storage, and sums of windows,
are not checked (a window without buckets plus one with them leaves the buckets short).
"""

from collections.abc import Iterator
from dataclasses import dataclass

from specwire.draft_bounds import first_position_over_drafts
from specwire.telemetry import (
    LOAD_BUCKET_EDGES,
    SLICE_HISTOGRAM_FIELDS,
    LoadSlice,
    WindowCounts,
)


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A part of a window that does not fit its totals."""

    field: str  # dotted path inside the window, e.g. "by_load.2.requests"
    message: str


def window_mismatch(window: WindowCounts) -> Mismatch | None:
    """The first rule `window` breaks (module docstring), or None."""
    return next(_mismatches(window), None)


def _mismatches(w: WindowCounts) -> Iterator[Mismatch]:
    outcomes = w.errors + w.client_errors + w.cancellations
    if outcomes > w.requests:
        yield Mismatch(
            "errors",
            f"errors + client_errors + cancellations ({outcomes}) exceed requests ({w.requests})",
        )
    j = first_position_over_drafts(w.accepted_per_position, w.drafts)
    if j is not None:
        yield Mismatch(
            f"accepted_per_position.{j}",
            f"accepted_per_position[{j}] ({w.accepted_per_position[j]}) exceeds drafts "
            f"({w.drafts})",
        )
    yield from _latency_mismatches(w)
    yield from _load_mismatches(w)
    yield from _acceptance_mismatches(w)


def _latency_mismatches(w: WindowCounts) -> Iterator[Mismatch]:
    timed = w.requests - w.client_errors
    samples = {name: getattr(w, name).total for name in ("ttft", "tpot", "e2e", "e2e_per_token")}
    for name, n in samples.items():
        if n > timed:
            yield Mismatch(
                name,
                f"{name} holds {n} samples, more than the {timed} requests that can have one "
                "(requests - client_errors)",
            )
    for part, whole in (("ttft", "e2e"), ("tpot", "ttft"), ("e2e_per_token", "e2e")):
        if samples[part] > samples[whole]:
            yield Mismatch(
                part,
                f"{part} holds {samples[part]} samples, more than {whole} ({samples[whole]})",
            )
    if samples["e2e_per_token"] > w.completion_tokens:
        yield Mismatch(
            "e2e_per_token",
            f"e2e_per_token holds {samples['e2e_per_token']} samples, more than "
            f"completion_tokens ({w.completion_tokens})",
        )


def _load_range(s: LoadSlice) -> tuple[int, int | None]:
    """The least and greatest load_sum of a slice's requests (None: no upper bound)."""
    low = LOAD_BUCKET_EDGES[s.load_bucket] * s.requests
    if s.load_bucket + 1 == len(LOAD_BUCKET_EDGES):
        return low, None
    return low, (LOAD_BUCKET_EDGES[s.load_bucket + 1] - 1) * s.requests


def _load_mismatches(w: WindowCounts) -> Iterator[Mismatch]:
    for i, s in enumerate(w.by_load):
        for name in SLICE_HISTOGRAM_FIELDS:
            n = getattr(s, name).total
            if n > s.requests:
                yield Mismatch(
                    f"by_load.{i}.{name}",
                    f"by_load[{i}].{name} holds {n} samples, more than the slice's "
                    f"requests ({s.requests})",
                )
        low, high = _load_range(s)
        load_sum = s.load_sum
        if load_sum is not None and (load_sum < low or (high is not None and load_sum > high)):
            yield Mismatch(
                f"by_load.{i}.load_sum",
                f"by_load[{i}].load_sum ({load_sum}) is outside [{low}, {high}]: "
                f"{s.requests} requests in load bucket {s.load_bucket}",
            )
    in_slices = sum(s.requests for s in w.by_load)
    if in_slices != w.load.dispatched:
        yield Mismatch(
            "by_load",
            f"by_load slices hold {in_slices} requests, load.dispatched is {w.load.dispatched}",
        )
    timed = w.requests - w.client_errors
    if w.load.dispatched > timed:
        yield Mismatch(
            "load.dispatched",
            f"load.dispatched ({w.load.dispatched}) exceeds requests - client_errors ({timed})",
        )
    for name in SLICE_HISTOGRAM_FIELDS:
        sliced, whole = sum(getattr(s, name).total for s in w.by_load), getattr(w, name).total
        if sliced > whole:
            yield Mismatch(
                "by_load",
                f"by_load slices hold {sliced} {name} samples, the window {whole}",
            )


def _acceptance_mismatches(w: WindowCounts) -> Iterator[Mismatch]:
    ra = w.request_acceptance
    if ra.requests > w.requests:
        yield Mismatch(
            "request_acceptance.requests",
            f"request_acceptance.requests ({ra.requests}) exceeds requests ({w.requests})",
        )
    if ra.accepted > w.accepted_tokens:
        yield Mismatch(
            "request_acceptance.accepted",
            f"request_acceptance.accepted ({ra.accepted}) exceeds accepted_tokens "
            f"({w.accepted_tokens})",
        )
    buckets = w.by_response_position.values()
    if not buckets:
        return
    drafted = sum(t.drafted_tokens for t in buckets)
    accepted = sum(t.accepted_tokens for t in buckets)
    if (drafted, accepted) != (w.drafted_tokens, w.accepted_tokens):
        yield Mismatch(
            "by_response_position",
            f"by_response_position adds up to {drafted} drafted and {accepted} accepted "
            f"tokens, the window has {w.drafted_tokens} and {w.accepted_tokens}",
        )
