"""The pure arm decision, on PolicySnapshot documents built here."""

import math
from typing import Any

import pytest

from gateway.decision.cohort import cohort_bucket, in_spec_cohort
from gateway.decision.decide import Decision, DecisionInput, Override, decide
from gateway.decision.features import request_features
from gateway.decision.reasons import RANDOMIZED
from gateway.decision.reasons import DecisionReason as R
from gateway.errors import ModelNotFound, PermissionDenied, ServiceUnavailable
from gateway.proxy.schemas import ChatCompletionBody
from specwire import Arm, PairCapabilities, RolloutState
from tests.gateway.policy import BASELINE_POOL, SPEC_POOL, make_snapshot

SPEC = ["http://127.0.0.1:1"]
BASE = ["http://127.0.0.1:2"]


def _decide(
    body: dict[str, Any] | None = None,
    *,
    tenant: str = "acme",
    key: str = "user-1",
    override: Override | None = None,
    age_s: float = 0.0,
    task: str | None = None,
    **snap: Any,
) -> Decision:
    snapshot = make_snapshot(spec_urls=SPEC, baseline_urls=BASE, **snap)
    parsed = ChatCompletionBody.model_validate(
        {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], **(body or {})}
    )
    t = next(t for t in snapshot.tenants if t.name == tenant)
    return decide(
        DecisionInput(
            snapshot=snapshot,
            snapshot_age_s=age_s,
            tenant=t,
            features=request_features(parsed, tenant=tenant, task=task),
            body=parsed,
            cohort_key=key,
            override=override,
        )
    )


def test_full_rollout_goes_to_spec_pool_with_pair_in_header() -> None:
    d = _decide()
    assert (d.arm, d.reason, d.pool.id) == (Arm.SPEC, R.ROLLOUT_FULL, SPEC_POOL)
    assert d.fallback is not None and d.fallback.id == BASELINE_POOL
    assert d.header() == "arm=spec; pair=tiny-v3; k=3; reason=rollout_full"


def test_no_segment_no_rollout_and_inactive_rollout_are_baseline() -> None:
    assert _decide(tenant="limited").reason is R.NO_SEGMENT
    assert _decide(with_rollout=False).reason is R.NO_ROLLOUT
    d = _decide(state=RolloutState.PAUSED)
    assert (d.arm, d.reason, d.pool.id) == (Arm.BASELINE, R.ROLLOUT_INACTIVE, BASELINE_POOL)
    assert d.header() == "arm=baseline; reason=rollout_inactive"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"min_p": 0.1}, "min_p"),
        ({"logit_bias": {"5": 1.0}}, "logit_bias"),
        ({"response_format": {"type": "json_object"}}, "structured_output"),
        ({"guided_regex": "a+"}, "structured_output"),
        ({"structured_outputs": {"choice": ["a", "b"]}}, "structured_output"),
    ],
)
def test_incompatible_parameters_force_baseline_without_spec_fallback(
    extra: dict[str, Any], param: str
) -> None:
    d = _decide(extra)
    assert (d.arm, d.reason, d.pool.id) == (Arm.BASELINE, R.INCOMPATIBLE_PARAMETER, BASELINE_POOL)
    # A fallback to the spec pool would silently change what min_p etc. mean.
    assert d.fallback is None


def test_neutral_values_and_declared_capabilities_keep_spec() -> None:
    assert _decide({"min_p": 0.0, "logit_bias": {}}).arm is Arm.SPEC
    caps = PairCapabilities(structured_output=True, penalties=False)
    assert _decide({"response_format": {"type": "json_object"}}, capabilities=caps).arm is Arm.SPEC
    d = _decide({"presence_penalty": 0.5}, capabilities=caps)
    assert d.reason is R.INCOMPATIBLE_PARAMETER
    assert _decide({"presence_penalty": 0.5}).arm is Arm.SPEC  # penalties declared by default


@pytest.mark.parametrize(
    "sampling",
    [{"temperature": 1.0}, {"temperature": 0.3}, {}],  # unset: OpenAI's default 1.0
)
def test_a_seeded_sampling_request_goes_where_the_seed_is_honoured(
    sampling: dict[str, Any],
) -> None:
    d = _decide({"seed": 1234, **sampling})
    assert (d.arm, d.reason, d.pool.id) == (Arm.BASELINE, R.SEED_NOT_REPRODUCIBLE, BASELINE_POOL)
    assert d.header() == "arm=baseline; reason=seed_not_reproducible"
    # Served non-reproducibly beats a 503: the spec pool stays its fallback.
    assert d.fallback is not None and d.fallback.id == SPEC_POOL
    # Not even an operator's "on" gives up the seed.
    on = _decide({"seed": 1234, **sampling}, tenant="ops", override="on")
    assert (on.arm, on.reason) == (Arm.BASELINE, R.SEED_NOT_REPRODUCIBLE)
    # Never mirrored in shadow: the spec arm would not serve it.
    assert _decide({"seed": 1234, **sampling}, state=RolloutState.SHADOW).mirror is None


def test_greedy_or_unseeded_requests_and_declared_seed_support_keep_spec() -> None:
    assert _decide({"seed": 1234, "temperature": 0.0}).reason is R.ROLLOUT_FULL  # greedy
    assert _decide({"temperature": 1.0}).reason is R.ROLLOUT_FULL  # no seed
    caps = PairCapabilities(seeded_sampling=True)
    d = _decide({"seed": 1234, "temperature": 1.0}, capabilities=caps)
    assert (d.arm, d.reason) == (Arm.SPEC, R.ROLLOUT_FULL)
    # Only randomized reasons are evidence: a seeded canary request is the baseline's
    # forced traffic, not its cohort's.
    canary = _decide({"seed": 7}, state=RolloutState.CANARY, percentage=100.0)
    assert canary.reason not in RANDOMIZED


def test_override_header_needs_permission() -> None:
    with pytest.raises(PermissionDenied):
        _decide(override="off")
    d = _decide(tenant="ops", override="off")
    assert (d.arm, d.reason) == (Arm.BASELINE, R.OVERRIDE_HEADER)
    d = _decide(tenant="ops", override="on", percentage=0.0, state=RolloutState.CANARY)
    assert (d.arm, d.reason) == (Arm.SPEC, R.OVERRIDE_HEADER)
    # "on" never beats an incompatible parameter.
    d = _decide({"min_p": 0.2}, tenant="ops", override="on")
    assert (d.arm, d.reason) == (Arm.BASELINE, R.INCOMPATIBLE_PARAMETER)


def test_stale_snapshot_fails_safe_to_baseline_even_with_override() -> None:
    d = _decide(age_s=7200.0)
    assert (d.arm, d.reason, d.pool.id) == (Arm.BASELINE, R.SNAPSHOT_STALE, BASELINE_POOL)
    d = _decide(tenant="ops", override="on", age_s=7200.0)
    assert d.reason is R.SNAPSHOT_STALE
    # Fail safe means the ordinary path only: no fallback onto the spec pool.
    assert d.fallback is None


def test_fall_back_switches_pool_and_reason() -> None:
    d = _decide().fall_back()
    assert (d.arm, d.reason, d.pool.id, d.fallback) == (
        Arm.BASELINE,
        R.POOL_UNAVAILABLE,
        BASELINE_POOL,
        None,
    )
    d = _decide(state=RolloutState.PAUSED).fall_back()
    assert (d.arm, d.pool.id) == (Arm.SPEC, SPEC_POOL)
    assert d.header() == "arm=spec; pair=tiny-v3; k=3; reason=pool_unavailable"


def test_unknown_model_is_404_and_missing_pool_goes_to_the_other() -> None:
    with pytest.raises(ModelNotFound):
        _decide({"model": "nope"})
    snapshot_without_baseline: dict[str, Any] = {"with_rollout": False}
    d = _decide(**snapshot_without_baseline)
    assert d.pool.id == BASELINE_POOL
    # Only a spec pool serves the model and the request cannot use it: 503, not a silent change.
    with pytest.raises(ServiceUnavailable):
        snap = make_snapshot(spec_urls=SPEC, baseline_urls=BASE, with_rollout=False)
        snap.pools = [p for p in snap.pools if p.id == SPEC_POOL]
        body = ChatCompletionBody.model_validate(
            {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "min_p": 0.5}
        )
        decide(
            DecisionInput(
                snapshot=snap,
                snapshot_age_s=0.0,
                tenant=snap.tenants[0],
                features=request_features(body, tenant="acme", task=None),
                body=body,
                cohort_key="k",
            )
        )


def test_cohort_bucket_is_a_fixed_function_of_its_inputs() -> None:
    # Pinned value: identical on every replica and after restarts (no process state).
    import hashlib

    expected = int.from_bytes(hashlib.sha256(b"salt-1|acme|user-42").digest()[:8], "big") % 10000
    assert cohort_bucket("salt-1", "acme", "user-42") == expected
    # A new salt reshuffles: over many users, about half change side at 50 %.
    moved = sum(
        in_spec_cohort("salt-1", "acme", f"u{i}", 50.0)
        != in_spec_cohort("salt-2", "acme", f"u{i}", 50.0)
        for i in range(1000)
    )
    assert 400 < moved < 600
    decisions = {
        _decide(percentage=50.0, state=RolloutState.RAMPING, key="u7").arm for _ in range(5)
    }
    assert len(decisions) == 1


def test_cohort_is_sticky_and_monotone_in_percentage() -> None:
    # A user on the spec arm at 5 % stays there at 25 % and 50 % (ramping only adds users).
    users = [f"user-{i}" for i in range(2000)]
    at = {p: {u for u in users if in_spec_cohort("s", "acme", u, p)} for p in (5.0, 25.0, 50.0)}
    assert at[5.0] <= at[25.0] <= at[50.0]


def test_rollout_percentage_is_honoured_within_binomial_bounds() -> None:
    n, p = 20_000, 0.25
    snapshot = make_snapshot(
        spec_urls=SPEC, baseline_urls=BASE, percentage=25.0, state=RolloutState.RAMPING
    )
    body = ChatCompletionBody.model_validate(
        {"model": "tiny", "messages": [{"role": "user", "content": "x"}]}
    )
    features = request_features(body, tenant="acme", task=None)
    on_spec = sum(
        decide(
            DecisionInput(
                snapshot=snapshot,
                snapshot_age_s=0.0,
                tenant=snapshot.tenants[0],
                features=features,
                body=body,
                cohort_key=f"user-{i}",
            )
        ).arm
        is Arm.SPEC
        for i in range(n)
    )
    sigma = math.sqrt(n * p * (1 - p))
    # 4.5 sigma: a false failure about once in 150,000 runs.
    assert abs(on_spec - n * p) < 4.5 * sigma, on_spec


def test_cohort_decisions_match_the_bucket_rule() -> None:
    for i in range(300):
        d = _decide(percentage=30.0, state=RolloutState.RAMPING, key=f"u{i}")
        expected = in_spec_cohort("salt-1", "acme", f"u{i}", 30.0)
        assert (d.arm is Arm.SPEC) == expected
        assert d.reason is (R.COHORT_SPEC if expected else R.COHORT_BASELINE)


def test_full_keeps_a_sticky_holdout_on_the_baseline_arm() -> None:
    users = [f"u{i}" for i in range(2000)]
    at_full = {u: _decide(holdout_percentage=5.0, key=u) for u in users}
    holdout = {u for u, d in at_full.items() if d.arm is Arm.BASELINE}
    assert all(at_full[u].reason is R.HOLDOUT for u in holdout)
    assert all(d.reason is R.ROLLOUT_FULL for u, d in at_full.items() if u not in holdout)
    # About 5 % of the cohorts, within binomial bounds (4.5 sigma).
    assert abs(len(holdout) - 100) < 4.5 * math.sqrt(2000 * 0.05 * 0.95)
    # Sticky: whoever was on the spec arm at 50 % stays there at full.
    at_half = {u for u in users if in_spec_cohort("salt-1", "acme", u, 50.0)}
    assert not at_half & holdout
    # No holdout configured: everyone on the spec arm, as before.
    assert all(_decide(key=u).arm is Arm.SPEC for u in users[:50])


def test_features_default_temperature_and_max_completion_tokens() -> None:
    body = ChatCompletionBody.model_validate(
        {
            "model": "tiny",
            "messages": [{"role": "user", "content": "x"}],
            "max_completion_tokens": 9,
        }
    )
    f = request_features(body, tenant="acme", task="code")
    assert (f.temperature, f.max_tokens, f.task, f.structured_output) == (1.0, 9, "code", False)


def test_shadow_serves_baseline_and_mirrors_its_sampled_share() -> None:
    d = _decide(state=RolloutState.SHADOW, percentage=100.0)
    assert (d.arm, d.reason, d.pool.id) == (Arm.BASELINE, R.SHADOW, BASELINE_POOL)
    assert d.header() == "arm=baseline; reason=shadow"
    assert d.mirror is not None and d.mirror.id == SPEC_POOL
    # Sampled per key: a 50 % shadow mirrors exactly the keys in the cohort range.
    keys = [f"req-{i}" for i in range(40)]
    mirrored = [
        k for k in keys if _decide(state=RolloutState.SHADOW, percentage=50.0, key=k).mirror
    ]
    assert mirrored == [k for k in keys if in_spec_cohort("salt-1", "acme", k, 50.0)]
    assert 0 < len(mirrored) < len(keys)
    # Nothing forced or incompatible is mirrored; a fallback drops the mirror.
    assert _decide({"min_p": 0.1}, state=RolloutState.SHADOW).mirror is None
    assert _decide(state=RolloutState.SHADOW, age_s=1e9).mirror is None
    off = _decide(tenant="ops", override="off", state=RolloutState.SHADOW)
    assert (off.reason, off.mirror) == (R.OVERRIDE_HEADER, None)
    assert _decide(state=RolloutState.SHADOW).fall_back().mirror is None
    other_engine = _decide(
        state=RolloutState.SHADOW, pair_engine_version="0.31.0", spec_engine_versions=["0.32.0"]
    )
    assert other_engine.mirror is None
    # Other non-exposing states never mirror.
    assert _decide(state=RolloutState.OFFLINE).mirror is None
    assert _decide(state=RolloutState.OFFLINE).reason is R.ROLLOUT_INACTIVE


def test_a_pair_is_never_served_by_workers_of_another_engine_version() -> None:
    # Every healthy spec worker runs another engine version than the pair was
    # validated on: baseline, with its own reason, and no fallback onto the spec pool.
    d = _decide(pair_engine_version="0.31.0", spec_engine_versions=["0.32.0"])
    assert (d.arm, d.reason, d.pool.id) == (
        Arm.BASELINE,
        R.ENGINE_VERSION_MISMATCH,
        BASELINE_POOL,
    )
    assert d.fallback is None
    assert d.header() == "arm=baseline; reason=engine_version_mismatch"
    d = _decide(
        pair_engine_version="0.31.0", spec_engine_versions=["0.32.0"], tenant="ops", override="on"
    )
    assert d.reason is R.ENGINE_VERSION_MISMATCH
    # Matching (or unreported) versions keep the spec arm.
    assert _decide(pair_engine_version="0.32.0", spec_engine_versions=["0.32.0"]).arm is Arm.SPEC
    assert _decide(pair_engine_version="0.32.0", spec_engine_versions=[None]).arm is Arm.SPEC
    assert _decide(spec_engine_versions=["0.99"]).arm is Arm.SPEC  # the pair names none


def test_the_balancer_skips_workers_of_another_engine_version() -> None:
    from gateway.routing.balancer import Balancer

    snapshot = make_snapshot(
        spec_urls=["http://a:1", "http://b:1"],
        baseline_urls=BASE,
        pair_engine_version="0.32.0",
        spec_engine_versions=["0.31.0", "0.32.0"],
    )
    spec = next(p for p in snapshot.pools if p.id == SPEC_POOL)
    balancer = Balancer(breaker_threshold=3, breaker_cooldown_s=1.0)
    chosen = {balancer.candidates(spec, set(), "0.32.0")[0].endpoint_url for _ in range(5)}
    assert chosen == {"http://b:1"}
    assert len(balancer.candidates(spec, set())) == 2
