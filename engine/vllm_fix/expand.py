"""The corrected `expand` kernel for vLLM's CPU fallback, and the patch that installs it.

torch is imported inside functions: this module is imported by the fix's
`sitecustomize.py` in every Python process started with it on PYTHONPATH, and
only vLLM processes should pay for torch.
"""

import inspect
import logging
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

BUGGY_MARKER = "_ensure_int64(output)"
PATCHED_FLAG = "__specroute_expand_fixed__"


def reference_expand(
    values: list[float], cu_num_tokens: list[int], replace_from: float, replace_to: float
) -> list[float]:
    """Plain-Python statement of what `expand_kernel` must compute.

    values[i] is repeated for request i's tokens (cu_num_tokens is the inclusive
    cumulative count), with `replace_from` mapped to `replace_to`.
    """
    out: list[float] = []
    start = 0
    for value, end in zip(values, cu_num_tokens, strict=True):
        out.extend([replace_to if value == replace_from else value] * (end - start))
        start = end
    return out


def fixed_expand_kernel_impl(
    output: "torch.Tensor",  # [num_tokens], any dtype
    input_val: "torch.Tensor",  # [batch_size], same dtype as output
    cu_num_tokens: "torch.Tensor",  # [batch_size], int32 or int64, inclusive cumsum
    replace_from: Any,
    replace_to: Any,
    MAX_NUM_TOKENS: int | None = None,  # the Triton kernel's constexpr name
) -> None:
    """Write the expansion into `output` itself, in `output`'s dtype."""
    import torch

    assert input_val.dim() == 1 and cu_num_tokens.shape == input_val.shape
    # [batch_size]
    counts = torch.diff(cu_num_tokens.to(torch.int64), prepend=cu_num_tokens.new_zeros(1))
    replaced = torch.where(
        input_val == replace_from,
        torch.full_like(input_val, replace_to),
        input_val,
    )
    # [sum(counts)]
    expanded = torch.repeat_interleave(replaced, counts)
    # NOTE: like the Triton kernel, positions past the last request stay untouched.
    output[: expanded.shape[0]].copy_(expanded.to(output.dtype))


def is_buggy(module: ModuleType) -> bool:
    """True when the module's `_expand_kernel_impl` writes into an int64 copy."""
    impl = getattr(module, "_expand_kernel_impl", None)
    if impl is None or getattr(impl, PATCHED_FLAG, False):
        return False
    try:
        source = inspect.getsource(impl)
    except (OSError, TypeError):
        return False
    return BUGGY_MARKER in source


def patch_module(module: ModuleType) -> bool:
    """Replace the buggy `_expand_kernel_impl`; a no-op on fixed vLLM builds."""
    if not is_buggy(module):
        return False
    setattr(fixed_expand_kernel_impl, PATCHED_FLAG, True)
    module._expand_kernel_impl = fixed_expand_kernel_impl  # type: ignore[attr-defined]
    log.info("specroute: patched %s._expand_kernel_impl", module.__name__)
    return True
