"""Where the fix's `sitecustomize.py` lives and how a child process gets it."""

import os
from pathlib import Path

_SITE_DIR = Path(__file__).resolve().parent / "site"


def site_dir() -> Path:
    """Directory holding the `sitecustomize.py` that installs the fix."""
    return _SITE_DIR


def pythonpath_with_fix(existing: str | None = None) -> str:
    """PYTHONPATH for a vLLM server: the fix first, then whatever was there.

    The project root is added too, so the child can import `engine.vllm_fix`
    even when the project is not installed in the interpreter that runs it.
    """
    project_root = _SITE_DIR.parents[2]
    parts = [str(_SITE_DIR), str(project_root)]
    if existing:
        parts.extend(p for p in existing.split(os.pathsep) if p and p not in parts)
    return os.pathsep.join(parts)
