"""The CPU LoRA op fix on vLLM's own ops: a row without an adapter (index -1) gets no
LoRA delta, rows with one get exactly what the unfixed op gives them."""

import importlib.util
import os
import subprocess
import sys
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from engine.vllm_fix import pythonpath_with_fix
from engine.vllm_fix.lora_rows import TARGET, is_buggy, patch_module

if TYPE_CHECKING:
    from torch import Tensor

torch = pytest.importorskip("torch")


def _fresh_ops() -> ModuleType:
    """vLLM's CPU LoRA ops, loaded anew so the patch does not leak between tests."""
    spec = importlib.util.find_spec(TARGET)
    if spec is None or spec.loader is None:
        pytest.skip("vLLM's torch LoRA ops are not installed")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _case() -> tuple["Tensor", "Tensor", "Tensor"]:
    torch.manual_seed(0)
    inputs = torch.randn(3, 4)
    weights = torch.randn(1, 1, 5, 4)  # one adapter slot, [slots, 1, out, in]
    indices = torch.tensor([-1, 0, -1])  # rows 0 and 2: no adapter
    return inputs, weights, indices


def test_the_unfixed_op_gives_rows_without_an_adapter_the_last_slots_delta() -> None:
    ops = _fresh_ops()
    assert is_buggy(ops)
    inputs, weights, indices = _case()
    out = torch.zeros(3, 5)
    ops.bgmv_expand(inputs, weights, out, indices, add_inputs=True)
    assert out[0].abs().sum() > 0  # the bug: a base-model row got the adapter's delta


@pytest.mark.parametrize("add_inputs", [True, False])
def test_fixed_expand_leaves_rows_without_an_adapter_alone(add_inputs: bool) -> None:
    reference = _fresh_ops()
    ops = _fresh_ops()
    assert patch_module(ops) and not is_buggy(ops) and not patch_module(ops)
    inputs, weights, indices = _case()
    before = torch.arange(15, dtype=torch.float32).reshape(3, 5)
    out, expected = before.clone(), before.clone()
    ops.bgmv_expand(inputs, weights, out, indices, add_inputs)
    reference.bgmv_expand(inputs, weights, expected, indices.clamp(min=0), add_inputs)
    assert torch.equal(out[[0, 2]], before[[0, 2]])
    assert torch.equal(out[1], expected[1])


def test_fixed_shrink_and_slice_leave_rows_without_an_adapter_alone() -> None:
    reference = _fresh_ops()
    ops = _fresh_ops()
    patch_module(ops)
    inputs, weights, indices = _case()
    shrunk = torch.full((3, 5), 7.0)
    ops.bgmv_shrink(inputs, weights, shrunk, indices, 0.5)
    expected = torch.zeros(3, 5)
    reference.bgmv_shrink(inputs, weights, expected, indices.clamp(min=0), 0.5)
    # like the GPU kernels, which skip index -1: those rows keep what they held
    assert torch.equal(shrunk[[0, 2]], torch.full((2, 5), 7.0))
    assert torch.equal(shrunk[1], expected[1])
    # through sgmv_expand_slice, which calls the module's bgmv_expand_slice by name
    sliced = torch.ones(3, 8)
    ops.sgmv_expand_slice(
        inputs, weights, sliced, None, torch.tensor([1, 1, 1]), indices, 3, 1, 3, 2, 5, True
    )
    assert torch.equal(sliced[[0, 2]], torch.ones(2, 8))
    assert sliced[1, 2:7].ne(1.0).any() and torch.equal(sliced[1, :2], torch.ones(2))


_PROBE = (
    "from vllm.lora.ops.torch_ops import bgmv_expand\n"
    "from vllm.lora.punica_wrapper import punica_cpu\n"
    "print(bgmv_expand.__module__, punica_cpu.bgmv_expand.__module__)\n"
)


@pytest.mark.parametrize(
    ("enabled", "expected"),
    [
        (True, "engine.vllm_fix.lora_rows engine.vllm_fix.lora_rows"),
        (False, f"{TARGET} {TARGET}"),
    ],
)
def test_sitecustomize_fixes_the_lora_ops_in_a_fresh_process(enabled: bool, expected: str) -> None:
    """The CPU punica wrapper imports the ops by name: it must get the fixed ones."""
    env = dict(os.environ, PYTHONPATH=pythonpath_with_fix(None))
    env["SPECROUTE_VLLM_FIX"] = "1" if enabled else "0"
    probe = [sys.executable, "-c", _PROBE]
    out = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == expected
