"""Pool specs for the bundled tiny pair, for tests, benchmarks and local runs.

On a deployed system these come from the control plane; here they are built
from the pair's directories so tests and benchmarks need no control plane.
"""

import os
from pathlib import Path

from specwire import PairVersionSpec, PoolSpec
from specwire.artifacts import BUNDLED_PAIR_DIR

TINY_PAIR_DIR = BUNDLED_PAIR_DIR
TINY_MODEL_NAME = "tiny"

# NOTE: small context and batch keep a CPU engine's start-up and memory low;
# 64 sequences still fit a request with n=64 or 16 concurrent clients.
TEST_ENGINE_ARGS: dict[str, object] = {"max-model-len": 512, "max-num-seqs": 64}


def tiny_pair_dir() -> Path:
    """The bundled pair, unless SPECROUTE_TINY_PAIR_DIR points elsewhere (development)."""
    override = os.environ.get("SPECROUTE_TINY_PAIR_DIR")
    return Path(override) if override else TINY_PAIR_DIR


def tiny_pair_present(pair_dir: Path | None = None) -> bool:
    root = pair_dir or tiny_pair_dir()
    return all((root / part / "config.json").is_file() for part in ("target", "draft"))


def tiny_pair_version(
    pair_dir: Path | None = None,
    num_speculative_tokens: int = 3,
    draft_sample_method: str = "probabilistic",
) -> PairVersionSpec:
    root = pair_dir or tiny_pair_dir()
    return PairVersionSpec(
        id=1,
        pair_name="tiny",
        version=1,
        label="tiny-bundled",
        method="draft_model",
        num_speculative_tokens=num_speculative_tokens,
        target_ref=str(root / "target"),
        draft_ref=str(root / "draft"),
        draft_sample_method=draft_sample_method,
    )


def tiny_spec_pool(
    pair_dir: Path | None = None,
    engine_args: dict[str, object] | None = None,
    num_speculative_tokens: int = 3,
) -> PoolSpec:
    pv = tiny_pair_version(pair_dir, num_speculative_tokens)
    return PoolSpec(
        id=1,
        name="tiny-spec",
        served_model_name=TINY_MODEL_NAME,
        target_ref=pv.target_ref,
        pair_version=pv,
        engine_args=dict(TEST_ENGINE_ARGS if engine_args is None else engine_args),
    )


def tiny_eagle_pool(
    pair_dir: Path | None = None,
    engine_args: dict[str, object] | None = None,
    num_speculative_tokens: int = 3,
) -> PoolSpec:
    """The bundled target drafting with its bundled EAGLE-1 head (`tiny_pair/eagle`)."""
    root = pair_dir or tiny_pair_dir()
    pv = PairVersionSpec(
        id=4,
        pair_name="tiny-eagle",
        version=1,
        label="tiny-eagle-bundled",
        method="eagle",
        num_speculative_tokens=num_speculative_tokens,
        target_ref=str(root / "target"),
        draft_ref=str(root / "eagle"),
        draft_sample_method="probabilistic",
    )
    return PoolSpec(
        id=4,
        name="tiny-eagle",
        served_model_name=TINY_MODEL_NAME,
        target_ref=pv.target_ref,
        pair_version=pv,
        engine_args=dict(TEST_ENGINE_ARGS if engine_args is None else engine_args),
    )


def tiny_baseline_pool(
    pair_dir: Path | None = None,
    engine_args: dict[str, object] | None = None,
    model: str = "target",
) -> PoolSpec:
    """A pool without speculation; model="draft" serves the draft alone (cost ratio c)."""
    root = pair_dir or tiny_pair_dir()
    return PoolSpec(
        id=2 if model == "target" else 3,
        name=f"tiny-baseline-{model}",
        served_model_name=TINY_MODEL_NAME,
        target_ref=str(root / model),
        engine_args=dict(TEST_ENGINE_ARGS if engine_args is None else engine_args),
    )
