"""Engine-test fixtures shared across modules."""

from collections import Counter

import pytest

from tests.engine.contract_checks import Outcome, sample_pairs
from tests.fixtures.vllm import RunningServer


@pytest.fixture(scope="session")
def baseline_t1(vllm_baseline_server: RunningServer) -> list[Counter[Outcome]]:
    """The baseline's T=1 two-token outcomes, sampled once for every spec method compared."""
    return sample_pairs(vllm_baseline_server, temperature=1.0)
