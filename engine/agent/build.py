"""What a worker reports as its engine build: the engine's version and the specroute
build around it (the package version, and whether the vLLM fixes of engine.vllm_fix
are applied), so a request record says which code produced its tokens."""

from importlib import metadata

ENGINE = "vllm"


def specroute_build(*, vllm_fix: bool) -> str:
    """E.g. 'specroute 0.1.0 (vllm_fix)'; 'unknown' when the package is not installed."""
    try:
        version = metadata.version("specroute")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"specroute {version} ({'vllm_fix' if vllm_fix else 'no vllm_fix'})"


def engine_build(engine_version: str | None, specroute: str | None) -> str | None:
    """E.g. 'vllm 0.32.0; specroute 0.1.0 (vllm_fix)'; None while the engine's version
    is unknown (the server did not answer /version)."""
    if engine_version is None:
        return None
    parts = [f"{ENGINE} {engine_version}", *([specroute] if specroute else [])]
    return "; ".join(parts)[:200]
