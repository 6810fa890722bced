"""Quotas end to end under a slowed Redis (issue #21): three real `specroute gateway
serve` processes share one real Redis through a proxy that delays its replies
0.02-0.2 s against the 0.1 s quota timeout (fault injection: Redis cannot be made slow
for some calls on purpose), in front of a fake engine process. A tenant's burst,
spread over one replica, stays within its budget; spread over three, within the
documented bound of 3 x budget. The long form, 1-3 replicas and more seeds, is
`python -m tests.hostile.quota_fleet` (bench/RESULTS.md, "Hostile inputs")."""

import asyncio
from pathlib import Path

import pytest

from tests.fixtures.services import require_redis
from tests.hostile.quota_fleet import TOKENS, burst, new_tenant, slow_fleet

BUDGET = 2000  # weighted tokens/min: 100 requests of TOKENS (20) each


@pytest.mark.redis
def test_a_burst_through_gateway_processes_stays_within_the_bound(tmp_path: Path) -> None:
    require_redis()
    one, fleet = new_tenant(), new_tenant()
    with slow_fleet(tmp_path, [one, fleet], replicas=3, budget=BUDGET, seed=1) as (urls, proxy):
        alone = asyncio.run(burst(urls[:1], one, requests=300, budget=BUDGET))
        spread = asyncio.run(burst(urls, fleet, requests=500, budget=BUDGET))
    assert proxy.replies_delayed > 0
    for result in (alone, spread):
        # Every request answered: 200 or the quota's 429, never a fault.
        assert result.other == {}, result
        assert result.ok + result.refused == result.requests
        assert result.admitted_tokens == result.ok * TOKENS
    assert alone.store_failures > 0 and spread.store_failures > 0, "Redis was never slow"
    # One replica: never past its budget, and the budget is used, not refused wholesale.
    assert alone.admitted_tokens == BUDGET, alone
    # Three replicas: at most 3 x budget (each replica's own ledger), at least one budget.
    assert BUDGET <= spread.admitted_tokens <= 3 * BUDGET, spread
