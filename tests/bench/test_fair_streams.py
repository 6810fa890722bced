"""Clients see tokens when the engine makes them, on the session's real servers.

Before the launcher confined each server's whole process tree to its core, the
baseline server's streams arrived in one late burst (client TPOT a third of the
engine's, TTFT 150 ms against the engine's 13 ms): the engine core's spin-wait
and the API server floated onto the client's core (bench/RESULTS.md, "Fair
streams"). The bar: client TPOT within 10 % of the engine's own, both servers.
"""

import asyncio

import psutil
import pytest

from bench.streams import measure_streams
from engine.pools.probe_prompts import CODE_PROMPTS
from tests.fixtures.vllm import RunningServer

pytestmark = pytest.mark.vllm


def _server_cores(server: RunningServer) -> set[frozenset[int]]:
    root = psutil.Process(server.process.pid)
    return {frozenset(p.cpu_affinity()) for p in [root, *root.children(recursive=True)]}


def test_every_process_of_a_server_stays_on_its_core(
    vllm_spec_server: RunningServer, vllm_baseline_server: RunningServer
) -> None:
    for server in (vllm_spec_server, vllm_baseline_server):
        assert server.server.command.cpu_affinity is not None
        expected = frozenset(server.server.command.cpu_affinity)
        # API server, engine core and worker: at least three processes, one core set
        assert len(psutil.Process(server.process.pid).children(recursive=True)) >= 2
        assert _server_cores(server) == {expected}
    if len(psutil.Process().cpu_affinity()) > 1:
        assert _server_cores(vllm_spec_server) != _server_cores(vllm_baseline_server)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_client_tpot_matches_the_engines_own(
    vllm_spec_server: RunningServer, vllm_baseline_server: RunningServer, concurrency: int
) -> None:
    for server in (vllm_baseline_server, vllm_spec_server):
        cell = asyncio.run(
            measure_streams(
                server.pool.name,
                server.base_url,
                server.model,
                CODE_PROMPTS,
                concurrency,
                0.0,
                requests_per_client=max(1, 4 // concurrency),
                max_tokens=32,
            )
        )
        assert len(cell.traces) == concurrency * max(1, 4 // concurrency)
        assert all(t.completion_tokens == 32 for t in cell.traces)
        assert cell.engine_tpot_s is not None and cell.engine_tpot_s > 0
        ratio = cell.tpot_ratio
        assert ratio is not None and 0.9 <= ratio <= 1.1, cell.summary()
        # no whole-stream burst: the first token reaches the client near the engine's
        assert cell.largest_gap_p50_s < 20 * cell.engine_tpot_s, cell.summary()
