"""A second, independent copy of the `gateway` package from another checkout, for the
benches that compare two trees in one process (ABBA): `bench.relay_micro`,
`bench.gateway_micro`."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType


def _gateway_modules() -> dict[str, ModuleType]:
    return {n: m for n, m in sys.modules.items() if n.split(".")[0] == "gateway"}


def load_gateway(root: Path, names: Sequence[str]) -> dict[str, ModuleType]:
    """Import `names` (gateway modules) from checkout `root`; every gateway module that
    import pulled in, by name. This process's own gateway modules are back in
    `sys.modules` afterwards, so both copies run side by side."""
    ours = _gateway_modules()
    for name in ours:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        for name in names:
            importlib.import_module(name)
        loaded = _gateway_modules()
        where = loaded[names[0]].__file__
        assert where is not None and Path(where).is_relative_to(root), where
    finally:
        sys.path.remove(str(root))
        for name in list(_gateway_modules()):
            del sys.modules[name]
        sys.modules.update(ours)
    return loaded
