"""LoRA adapters in routing: a request names an adapter as its model (vLLM's API), the
features carry base model and adapter, segments select on adapters, the decision
header names the adapter, and a pair built for another adapter is not used blindly."""

from pathlib import Path

import httpx
import pytest

from gateway.decision.decide import Decision, DecisionInput, Override, decide
from gateway.decision.features import request_features
from gateway.decision.reasons import DecisionReason as R
from gateway.errors import ModelNotFound
from gateway.proxy.schemas import ChatCompletionBody
from specwire import (
    Arm,
    PairVersionSpec,
    PolicySnapshot,
    SegmentSelector,
    SegmentSpec,
)
from tests.gateway.policy import (
    BASELINE_POOL,
    SEGMENT_ID,
    SPEC_POOL,
    TENANT_KEY,
    make_snapshot,
)
from tests.gateway.server import run_gateway

ADAPTER = "tiny-sql"


def _snapshot(
    *,
    pair_adapter: str | None = None,
    spec_adapters: tuple[str, ...] = (ADAPTER,),
    baseline_adapters: tuple[str, ...] = (ADAPTER,),
    selector: SegmentSelector | None = None,
) -> PolicySnapshot:
    snap = make_snapshot(spec_urls=["http://127.0.0.1:1"], baseline_urls=["http://127.0.0.1:2"])
    adapters = {SPEC_POOL: list(spec_adapters), BASELINE_POOL: list(baseline_adapters)}
    pools = [p.model_copy(update={"adapters": adapters[p.id]}) for p in snap.pools]
    pairs: list[PairVersionSpec] = [
        v.model_copy(update={"adapter_id": pair_adapter}) for v in snap.pair_versions
    ]
    segments = snap.segments
    if selector is not None:
        segments = [SegmentSpec(id=SEGMENT_ID, name="acme-chat", priority=10, selector=selector)]
    return snap.model_copy(update={"pools": pools, "pair_versions": pairs, "segments": segments})


def _decide(
    snapshot: PolicySnapshot, model: str = ADAPTER, override: Override | None = None
) -> Decision:
    body = ChatCompletionBody.model_validate(
        {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    )
    tenant = next(t for t in snapshot.tenants if t.name == ("ops" if override else "acme"))
    return decide(
        DecisionInput(
            snapshot=snapshot,
            snapshot_age_s=0.0,
            tenant=tenant,
            features=request_features(body, tenant=tenant.name, task=None, snapshot=snapshot),
            body=body,
            cohort_key="user-1",
            override=override,
        )
    )


def test_naming_an_adapter_fills_the_adapter_feature_with_the_base_model() -> None:
    snap = _snapshot()
    body = ChatCompletionBody.model_validate(
        {"model": ADAPTER, "messages": [{"role": "user", "content": "hi"}]}
    )
    features = request_features(body, tenant="acme", task="code", snapshot=snap)
    assert (features.model, features.adapter) == ("tiny", ADAPTER)
    plain = body.model_copy(update={"model": "tiny"})
    assert request_features(plain, tenant="acme", task=None, snapshot=snap).adapter is None
    assert snap.adapter_base(ADAPTER) == "tiny" and snap.adapter_base("tiny") is None
    assert snap.adapter_base("unknown") is None


def test_a_segment_selecting_the_adapter_matches_and_its_rollout_serves_spec() -> None:
    snap = _snapshot(selector=SegmentSelector(adapters=[ADAPTER]))
    d = _decide(snap)
    assert d.segment is not None and d.segment.id == SEGMENT_ID
    assert (d.arm, d.reason, d.pool.id) == (Arm.SPEC, R.ROLLOUT_FULL, SPEC_POOL)
    assert d.header() == f"arm=spec; pair=tiny-v3; k=3; adapter={ADAPTER}; reason=rollout_full"
    # The plain model does not match an adapters selector.
    assert _decide(snap, model="tiny").reason is R.NO_SEGMENT


def test_an_adapter_the_pair_was_not_built_for_goes_to_baseline_typed() -> None:
    # The segment selects by tenant: no rollout measures this adapter's yield.
    d = _decide(_snapshot(pair_adapter=None))
    assert (d.arm, d.reason, d.pool.id) == (Arm.BASELINE, R.ADAPTER_MISMATCH, BASELINE_POOL)
    assert d.header() == f"arm=baseline; adapter={ADAPTER}; reason=adapter_mismatch"
    # Speculation stays lossless: the spec pool is still the fallback before the first byte.
    assert d.fallback is not None and d.fallback.id == SPEC_POOL
    # A pair built for another adapter, and a request without one for a pair built for one.
    other = _decide(_snapshot(pair_adapter="tiny-legal", spec_adapters=(ADAPTER, "tiny-legal")))
    assert other.reason is R.ADAPTER_MISMATCH
    assert _decide(_snapshot(pair_adapter=ADAPTER), model="tiny").reason is R.ADAPTER_MISMATCH
    # The override header still reaches the spec pool (ops measuring by hand).
    assert _decide(_snapshot(), override="on").arm is Arm.SPEC


def test_the_pair_built_for_the_adapter_serves_it_on_spec() -> None:
    d = _decide(_snapshot(pair_adapter=ADAPTER))
    assert (d.arm, d.reason) == (Arm.SPEC, R.ROLLOUT_FULL)


def test_pools_not_serving_the_adapter_are_not_candidates() -> None:
    # Only the baseline pool serves it: the rollout needs both, so no rollout applies.
    d = _decide(_snapshot(spec_adapters=()))
    assert (d.arm, d.reason, d.pool.id) == (Arm.BASELINE, R.NO_ROLLOUT, BASELINE_POOL)
    with pytest.raises(ModelNotFound) as err:
        _decide(_snapshot(spec_adapters=(), baseline_adapters=()))
    assert err.value.param == "model"


def test_models_listing_names_adapters_like_vllm(tmp_path: Path) -> None:
    with run_gateway(tmp_path, _snapshot()) as gw:
        resp = httpx.get(
            gw.base_url + "/v1/models", headers={"Authorization": f"Bearer {TENANT_KEY}"}
        )
    assert resp.status_code == 200
    assert [m["id"] for m in resp.json()["data"]] == ["tiny", ADAPTER]
