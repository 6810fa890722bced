"""The cost-realistic target: the tiny target's exact distribution, more weight per step."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from safetensors.numpy import load_file

from engine.pools.launcher import LaunchOptions, build_server_command
from engine.pools.local import tiny_baseline_pool
from engine.pools.probe_prompts import CODE_PROMPTS, PROSE_PROMPTS
from engine.pools.server import VllmServer
from engine.tiny.heavy import STAMP, build_heavy_pair
from tests.fixtures.vllm import STARTUP_TIMEOUT_S, RunningServer, free_port, require_tiny_pair

EXTRA = 6


@pytest.fixture(scope="module")
def heavy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_heavy_pair(require_tiny_pair(), tmp_path_factory.mktemp("heavy"), EXTRA)


def test_extra_blocks_add_exactly_zero_and_the_shipped_layers_are_untouched(
    heavy_dir: Path,
) -> None:
    tiny = load_file(str(require_tiny_pair() / "target" / "model.safetensors"))
    heavy = load_file(str(heavy_dir / "target" / "model.safetensors"))
    for name, weight in tiny.items():
        assert np.array_equal(heavy[name], weight), name
    extra = {k: v for k, v in heavy.items() if k not in tiny}
    layers = {int(k.split(".")[2]) for k in extra}
    assert layers == set(range(4, 4 + EXTRA))
    for name, weight in extra.items():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            assert not weight.any(), name
        elif name.endswith("proj.weight"):
            assert np.abs(weight).max() > 0, name  # real weights, real traffic
    config = (heavy_dir / "target" / "config.json").read_text()
    assert f'"num_hidden_layers": {4 + EXTRA}' in config
    assert (heavy_dir / "draft" / "model.safetensors").read_bytes() == (
        require_tiny_pair() / "draft" / "model.safetensors"
    ).read_bytes()


def test_the_build_is_deterministic_and_reused(heavy_dir: Path, tmp_path: Path) -> None:
    again = build_heavy_pair(require_tiny_pair(), tmp_path, EXTRA)
    first = (heavy_dir / "target" / "model.safetensors").read_bytes()
    assert (again / "target" / "model.safetensors").read_bytes() == first
    stamp = (again / "target" / STAMP).stat().st_mtime_ns
    build_heavy_pair(require_tiny_pair(), tmp_path, EXTRA)
    assert (again / "target" / STAMP).stat().st_mtime_ns == stamp


@pytest.fixture(scope="module")
def heavy_server(heavy_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pool = tiny_baseline_pool(heavy_dir)
    command = build_server_command(pool, free_port(), LaunchOptions(cpu_cores="0"))
    server = VllmServer(command, tmp_path_factory.mktemp("heavy-log") / "server.log")
    server.start()
    try:
        server.wait_ready(STARTUP_TIMEOUT_S)
        yield server.base_url
    finally:
        server.stop()


def _greedy(url: str, prompt: str) -> tuple[list[str], list[float]]:
    body = {
        "model": "tiny",
        "prompt": prompt,
        "max_tokens": 24,
        "temperature": 0.0,
        "ignore_eos": True,
        "logprobs": 1,
    }
    choice = httpx.post(f"{url}/v1/completions", json=body, timeout=120).json()["choices"][0]
    return choice["logprobs"]["tokens"], choice["logprobs"]["token_logprobs"]


@pytest.mark.vllm
def test_greedy_output_equals_the_tiny_targets_in_vllm(
    heavy_server: str, vllm_baseline_server: RunningServer
) -> None:
    for prompt in (*CODE_PROMPTS[:4], *PROSE_PROMPTS[:4]):
        tokens, logprobs = _greedy(heavy_server, prompt)
        want_tokens, want_logprobs = _greedy(vllm_baseline_server.base_url, prompt)
        assert len(tokens) == 24
        assert tokens == want_tokens, prompt
        assert logprobs == pytest.approx(want_logprobs, abs=1e-4), prompt
