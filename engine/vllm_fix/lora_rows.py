"""Fix for vLLM's CPU LoRA ops: a row without an adapter must get no LoRA delta.

`vllm/lora/ops/torch_ops/lora_ops.py` (the CPU punica path) gathers
`lora_weights[lora_indices]` for every row, including rows whose index is -1
("no adapter"). Negative indexing picks the *last* adapter slot, so in a batch
that mixes adapter requests with base-model requests, the base-model rows get an
adapter's delta: their output is not the base model's (vllm-project/vllm#48421,
#49656; measured here: 0 of 12 base-model greedy completions matched when rot13
requests ran in the same batch, 12 of 12 alone). The wrapped ops zero the inputs of
rows without an adapter (the ops are linear in them, so those rows get no delta) and,
where an op overwrites instead of adding, put those rows' previous values back.

Applied like the expand fix: the fix's `sitecustomize.py` calls `patch_module` the
moment the module is imported, before `torch_ops/__init__` and the CPU punica
wrapper import its functions by name. torch is imported inside functions.
"""

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

TARGET = "vllm.lora.ops.torch_ops.lora_ops"
PATCHED_FLAG = "__specroute_lora_rows_fixed__"
BUGGY_MARKER = "lora_b_weights[lora_indices_tensor]"
OPS = ("bgmv_expand", "bgmv_shrink", "bgmv_expand_slice")
# Whether each op overwrites its output rows (False) or adds to them (True) by default,
# and the position of its add_inputs argument (None: the op always overwrites).
_ADD_INPUTS_ARG = {"bgmv_expand": (4, True), "bgmv_shrink": None, "bgmv_expand_slice": (6, True)}


def _without_adapter_rows(op: Callable[..., None], name: str) -> Callable[..., None]:
    def fixed(
        inputs: "torch.Tensor",
        weights: "torch.Tensor",
        output_tensor: "torch.Tensor",
        lora_indices_tensor: "torch.Tensor",
        *args: Any,
        **kwargs: Any,
    ) -> None:
        none = lora_indices_tensor < 0
        if not bool(none.any()) or inputs.shape[0] != lora_indices_tensor.shape[0]:
            op(inputs, weights, output_tensor, lora_indices_tensor, *args, **kwargs)
            return
        adds = _adds(name, args, kwargs)
        # [rows] -> the rows without an adapter keep their values when the op overwrites
        kept = None if adds else output_tensor[none].clone()
        masked = inputs.masked_fill(none.unsqueeze(1), 0)
        op(masked, weights, output_tensor, lora_indices_tensor.clamp(min=0), *args, **kwargs)
        if kept is not None:
            output_tensor[none] = kept

    setattr(fixed, PATCHED_FLAG, True)
    fixed.__name__ = name
    return fixed


def _adds(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether this call adds to its output rows (`add_inputs`) rather than overwriting."""
    spec = _ADD_INPUTS_ARG[name]
    if spec is None:
        return False
    position, default = spec
    index = position - 4  # into the arguments after lora_indices_tensor
    return bool(kwargs.get("add_inputs", args[index] if len(args) > index else default))


def is_buggy(module: ModuleType) -> bool:
    """True when the module's ops index the weights with the raw (possibly -1) indices."""
    import inspect

    for name in OPS:
        op = getattr(module, name, None)
        if op is None or getattr(op, PATCHED_FLAG, False):
            return False
        try:
            if BUGGY_MARKER not in inspect.getsource(op):
                return False
        except (OSError, TypeError):
            return False
    return True


def patch_module(module: ModuleType) -> bool:
    """Wrap the three CPU LoRA ops; a no-op on builds that index safely."""
    if not is_buggy(module):
        return False
    for name in OPS:
        setattr(module, name, _without_adapter_rows(getattr(module, name), name))
    return True
