"""The wire contract: selector matching and segment resolution are deterministic."""

import itertools
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from specwire import (
    LATENCY_BUCKETS_MS,
    LatencyHistogram,
    PolicySnapshot,
    RequestFeatures,
    SegmentSelector,
    SegmentSpec,
)


def _features(**kw: object) -> RequestFeatures:
    base: dict[str, object] = {"tenant": "acme", "model": "tiny", "temperature": 0.0}
    base.update(kw)
    return RequestFeatures.model_validate(base)


def test_selector_half_open_ranges() -> None:
    sel = SegmentSelector(temperature_min=0.0, temperature_max=0.5)
    assert sel.matches(_features(temperature=0.0))
    assert sel.matches(_features(temperature=0.49))
    assert not sel.matches(_features(temperature=0.5))


def test_selector_conditions_conjoin() -> None:
    sel = SegmentSelector(tenants=["acme"], tasks=["code"], structured_output=False)
    assert sel.matches(_features(task="code"))
    assert not sel.matches(_features(task="prose"))
    assert not sel.matches(_features(task="code", tenant="other"))
    assert not sel.matches(_features(task="code", structured_output=True))


def test_selector_max_tokens_needs_a_value() -> None:
    sel = SegmentSelector(max_tokens_min=1, max_tokens_max=256)
    assert sel.matches(_features(max_tokens=100))
    assert not sel.matches(_features(max_tokens=256))
    assert not sel.matches(_features())


def test_selector_rejects_inverted_range() -> None:
    with pytest.raises(ValidationError, match="temperature_min must be below"):
        SegmentSelector(temperature_min=1.0, temperature_max=0.5)


def test_overlapping_segments_resolve_by_priority_then_id() -> None:
    snap = PolicySnapshot(
        version=1,
        generated_at=datetime.now(UTC),
        ttl_seconds=30,
        segments=[
            SegmentSpec(id=3, name="any", priority=0, selector=SegmentSelector()),
            SegmentSpec(id=2, name="code-b", priority=5, selector=SegmentSelector(tasks=["code"])),
            SegmentSpec(id=1, name="code-a", priority=5, selector=SegmentSelector(tasks=["code"])),
        ],
    )
    hit = snap.segment_for(_features(task="code"))
    assert hit is not None and hit.name == "code-a"
    other = snap.segment_for(_features(task="prose"))
    assert other is not None and other.name == "any"


def test_latency_buckets_are_log_spaced_and_histogram_validates() -> None:
    assert LATENCY_BUCKETS_MS[0] == pytest.approx(0.1)
    assert LATENCY_BUCKETS_MS[-1] == pytest.approx(100_000.0)
    ratios = {round(b / a, 3) for a, b in itertools.pairwise(LATENCY_BUCKETS_MS)}
    assert ratios <= {1.259, 1.258, 1.26}
    assert LatencyHistogram().total == 0
    with pytest.raises(ValidationError):
        LatencyHistogram(counts=[1, 2, 3])


def test_load_slices_add_their_load_sums_and_lose_them_when_one_part_has_none() -> None:
    from specwire.telemetry import LoadSlice, add_load_slices

    recorded = add_load_slices([[LoadSlice(load_bucket=4, requests=2, load_sum=9)]] * 2)
    assert [(s.requests, s.load_sum) for s in recorded] == [(4, 18)]
    mixed = add_load_slices(
        [[LoadSlice(load_bucket=4, requests=2, load_sum=9)], [LoadSlice(load_bucket=4, requests=1)]]
    )
    assert [(s.requests, s.load_sum) for s in mixed] == [(3, None)]


def test_the_old_contract_path_still_imports_with_a_deprecation_warning() -> None:
    # One release of grace for clients written against control.contract.
    import subprocess
    import sys

    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n"
        "    import control.contract\n"
        "except DeprecationWarning as exc:\n"
        "    print('warned:', exc)\n"
        "warnings.simplefilter('ignore')\n"
        "from control.contract.admin_client import AdminClient\n"
        "from control.contract import RolloutState\n"
        "import specwire.admin_client, specwire\n"
        "print(AdminClient is specwire.admin_client.AdminClient,"
        " RolloutState is specwire.RolloutState)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "warned: control.contract is deprecated" in out
    assert out.strip().endswith("True True")
