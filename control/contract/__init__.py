"""Deprecated alias of :mod:`specwire`, kept for one release.

The wire documents and the admin SDK moved to the top-level package `specwire`
(the floor under both planes). `control.contract` and `control.contract.X` still
import, as the same module objects, with a DeprecationWarning.
"""

import importlib
import pkgutil
import sys
import warnings
from typing import Any

import specwire

warnings.warn(
    "control.contract is deprecated and goes away in the next release: import specwire",
    DeprecationWarning,
    stacklevel=2,
)

for _info in pkgutil.iter_modules(specwire.__path__):
    sys.modules[f"{__name__}.{_info.name}"] = importlib.import_module(f"specwire.{_info.name}")


def __getattr__(name: str) -> Any:
    return getattr(specwire, name)


def __dir__() -> list[str]:
    return dir(specwire)
