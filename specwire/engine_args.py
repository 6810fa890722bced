"""The vLLM server options a pool's `engine_args` may set, and their typed values.

Control checks a pool's engine arguments against this list when they are written
(422 naming the flag) and the launcher checks them again before building argv, so
a row written some other way still cannot reach vLLM's command line. Anything not
listed is refused: vLLM 0.32 has about 330 flags, and many of them load a path, a
Python class or a template (code), or change who may talk to the engine.

NOTE: keys are compared after the launcher's own normalisation (`--` stripped, `_`
as `-`), and values must be plain JSON values of the listed type: a string value
never starts with `-`, so no value can be read by vLLM's argparse as another flag.
"""

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

# Flags the launcher sets itself (or that would take the engine away from the
# gateway and the agent); a pool may not set them.
RESERVED_ENGINE_FLAGS = frozenset(
    {
        "model",
        "served-model-name",
        "host",
        "port",
        "uds",
        "root-path",
        "api-key",
        "speculative-config",
        "spec-method",
        "spec-model",
        "spec-tokens",
        "enable-request-id-headers",
        "per-request-spec-decode-metrics",
    }
)

ArgKind = Literal["int", "float", "bool", "choice", "text", "lora_modules"]

LORA_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MAX_LORA_MODULES = 64
MAX_TEXT_LENGTH = 64


@dataclass(frozen=True)
class EngineArg:
    """One allowed flag: its value type and bounds."""

    kind: ArgKind
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str | int, ...] = ()
    pattern: str | None = None

    def value_text(self) -> str:
        """The allowed values, as the docs print them."""
        if self.kind == "bool":
            return "true / false"
        if self.kind == "choice":
            return " / ".join(str(c) for c in self.choices)
        if self.kind in ("int", "float"):
            return f"{self.kind} in [{_number(self.low)}, {_number(self.high)}]"
        if self.kind == "text":
            return f"text matching `{self.pattern}`"
        return (
            f"list of up to {MAX_LORA_MODULES} `name=path` or `{{name, path}}`; path inside "
            "the model roots"
        )


def _number(value: float | None) -> str:
    assert value is not None
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _int(low: int, high: int, description: str) -> EngineArg:
    return EngineArg("int", description, low=low, high=high)


def _bool(description: str) -> EngineArg:
    return EngineArg("bool", description)


def _choice(choices: Sequence[str | int], description: str) -> EngineArg:
    return EngineArg("choice", description, choices=tuple(choices))


ALLOWED_ENGINE_ARGS: dict[str, EngineArg] = {
    # Model and memory.
    "max-model-len": _int(16, 1_048_576, "Context length (prompt + completion), tokens."),
    "dtype": _choice(
        ["auto", "bfloat16", "float", "float16", "float32", "half"], "Weights and activations."
    ),
    "seed": _int(0, 2**32 - 1, "Engine random seed."),
    "max-logprobs": _int(0, 1024, "Most logprobs a request may ask for."),
    "quantization": EngineArg(
        "text",
        "A built-in quantization method by name (e.g. fp8).",
        pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$",
    ),
    "enforce-eager": _bool("No CUDA graphs (the CPU build's default: true)."),
    "disable-sliding-window": _bool("Cap the context at the sliding window."),
    "disable-cascade-attn": _bool("Turn off cascade attention."),
    "gpu-memory-utilization": EngineArg(
        "float", "Share of GPU memory the engine may use.", low=0.01, high=1.0
    ),
    "kv-cache-memory-bytes": _int(1, 2**50, "KV-cache size in bytes (overrides the share)."),
    "kv-cache-dtype": _choice(
        ["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"], "KV-cache element type."
    ),
    "block-size": _choice([1, 8, 16, 32, 64, 128, 256], "KV-cache block size, tokens."),
    "enable-prefix-caching": _bool("Reuse KV blocks of shared prefixes."),
    "cpu-offload-gb": EngineArg("float", "Weights offloaded to CPU, GiB.", low=0, high=1024),
    # Parallelism.
    "tensor-parallel-size": _int(1, 64, "Tensor-parallel ranks."),
    "pipeline-parallel-size": _int(1, 64, "Pipeline-parallel stages."),
    # Scheduler.
    "max-num-seqs": _int(1, 4096, "Most sequences in one step."),
    "max-num-batched-tokens": _int(1, 1_048_576, "Most tokens in one step."),
    "long-prefill-token-threshold": _int(0, 1_048_576, "Prefill length counted as long."),
    "scheduling-policy": _choice(["fcfs", "priority"], "Order of waiting requests."),
    "enable-chunked-prefill": _bool("Split long prefills across steps."),
    "async-scheduling": _bool("Overlap scheduling with the model step."),
    "stream-interval": _int(1, 1024, "Tokens between streamed chunks."),
    "performance-mode": _choice(["balanced", "interactivity", "throughput"], "Tuning preset."),
    # LoRA.
    "enable-lora": _bool("Serve LoRA adapters (implied by lora-modules)."),
    "lora-modules": EngineArg("lora_modules", "Adapters served under their names."),
    "max-loras": _int(1, 256, "Adapters in one batch."),
    "max-lora-rank": _choice([1, 8, 16, 32, 64, 128, 256, 320, 512], "Highest adapter rank."),
    "max-cpu-loras": _int(1, 1024, "Adapters cached in CPU memory."),
    "lora-dtype": _choice(["auto", "bfloat16", "float16"], "Adapter weights' type."),
    # Logging.
    "disable-log-stats": EngineArg("bool", "No periodic stats log line (true only).", high=1),
    "enable-log-requests": _bool("Log each request."),
    "max-log-len": _int(0, 1_000_000, "Most prompt characters in a request log line."),
    "uvicorn-log-level": _choice(
        ["critical", "debug", "error", "info", "trace", "warning"], "HTTP server log level."
    ),
    "disable-uvicorn-access-log": _bool("No HTTP access log."),
    "shutdown-timeout": _int(0, 3600, "Seconds to drain requests on shutdown."),
}

# NOTE: `disable-log-stats` is a store_true flag in vLLM 0.32 (no --no- form), marked
# by high=1 above: only `true` is accepted.


class EngineArgRefused(ValueError):
    """One engine argument that may not reach vLLM: `flag` names it, `code` says why
    (`engine_arg_reserved`, `engine_arg_not_allowed`, `engine_arg_invalid`,
    `engine_arg_outside_model_roots`)."""

    def __init__(self, flag: str, code: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag
        self.code = code
        self.message = message


def flag_name(key: str) -> str:
    """A key as the launcher writes it on the command line (without the dashes)."""
    return key.removeprefix("--").replace("_", "-")


def confined_path(ref: str, roots: Sequence[Path]) -> str | None:
    """The real path of `ref` (relative to the working directory) if it lies inside
    one of `roots` (after symlinks and `..`); else None."""
    try:
        resolved = (Path.cwd() / ref).resolve()
        inside = any(resolved.is_relative_to(root.resolve()) for root in roots)
    except (OSError, RuntimeError, ValueError):  # NUL bytes, symlink loops, surrogates
        return None
    return str(resolved) if inside else None


def check_engine_args(engine_args: dict[str, Any], *, model_roots: Sequence[Path]) -> None:
    """Raises EngineArgRefused for the first argument outside the allow-list, with a
    value of the wrong type or bounds, or naming a path outside `model_roots`."""
    seen: dict[str, str] = {}
    for key, value in engine_args.items():
        flag = flag_name(key) if isinstance(key, str) else str(key)
        if flag in seen:
            raise EngineArgRefused(
                flag, "engine_arg_invalid", f"{seen[flag]!r} and {key!r} both set --{flag}"
            )
        seen[flag] = key
        if flag in RESERVED_ENGINE_FLAGS:
            raise EngineArgRefused(
                flag, "engine_arg_reserved", f"--{flag} is set by the launcher, not by a pool"
            )
        spec = ALLOWED_ENGINE_ARGS.get(flag)
        if spec is None:
            raise EngineArgRefused(
                flag,
                "engine_arg_not_allowed",
                f"--{flag} is not an allowed engine argument (see docs/engine-args.md)",
            )
        if spec.kind == "lora_modules":
            problem = _lora_problem(value, model_roots)
        else:
            problem = _value_problem(spec, value)
        if problem is not None:
            code, message = problem
            raise EngineArgRefused(flag, code, f"--{flag}: {message}")


Problem = tuple[str, str]  # (code, message)


def _value_problem(spec: EngineArg, value: Any) -> Problem | None:
    problem = _scalar_problem(spec, value)
    return None if problem is None else ("engine_arg_invalid", problem)


def _scalar_problem(spec: EngineArg, value: Any) -> str | None:
    if spec.kind == "bool":
        if not isinstance(value, bool):
            return "must be true or false"
        if spec.high == 1 and not value:
            return "can only be true"
        return None
    if spec.kind == "int" or spec.kind == "float":
        wrong_type = not isinstance(value, int if spec.kind == "int" else int | float)
        if isinstance(value, bool) or wrong_type:
            return f"must be a{'n integer' if spec.kind == 'int' else ' number'}"
        assert spec.low is not None and spec.high is not None
        # NOTE: a huge JSON integer would overflow float(); it is out of bounds anyway.
        number = float(value) if abs(value) < 2**62 else float("inf")
        if not spec.low <= number <= spec.high:  # NaN too
            return f"must be in [{_number(spec.low)}, {_number(spec.high)}]"
        return None
    if spec.kind == "choice":
        if isinstance(value, bool) or value not in spec.choices:
            return f"must be one of {', '.join(str(c) for c in spec.choices)}"
        return None
    if spec.kind == "text":
        assert spec.pattern is not None
        if not isinstance(value, str) or re.fullmatch(spec.pattern, value) is None:
            return f"must match {spec.pattern}"
        return None
    raise AssertionError(f"no value check for {spec.kind}")


def _lora_items(value: Any) -> Iterator[Any]:
    if isinstance(value, str | dict):
        yield value
    elif isinstance(value, list):
        yield from value
    else:
        yield None


def _lora_problem(value: Any, roots: Sequence[Path]) -> Problem | None:
    items = list(_lora_items(value))
    if not 1 <= len(items) <= MAX_LORA_MODULES:
        return ("engine_arg_invalid", f"must list 1 to {MAX_LORA_MODULES} adapters")
    for item in items:
        named = _lora_name_and_path(item)
        if isinstance(named, str):
            return ("engine_arg_invalid", named)
        name, path = named
        if not isinstance(name, str) or re.fullmatch(LORA_NAME_PATTERN, name) is None:
            return ("engine_arg_invalid", f"an adapter name must match {LORA_NAME_PATTERN}")
        if not isinstance(path, str) or not path or len(path) > 1000:
            return ("engine_arg_invalid", "an adapter path must be a non-empty string")
        if confined_path(path, roots) is None:
            return (
                "engine_arg_outside_model_roots",
                "an adapter path must lie inside the configured model roots "
                "(SPECROUTE_MODEL_ROOTS)",
            )
    return None


def _lora_name_and_path(item: Any) -> tuple[Any, Any] | str:
    """(name, path) of one adapter entry, or what is wrong with it."""
    if isinstance(item, str) and item.lstrip().startswith("{"):
        try:
            item = json.loads(item)
        except ValueError:
            return "an adapter's JSON form does not parse"
    if isinstance(item, dict):
        if set(item) != {"name", "path"}:
            return "an adapter object has exactly the keys name and path"
        return item["name"], item["path"]
    if isinstance(item, str) and "=" in item:
        name, path = item.split("=", 1)
        return name, path
    return "each adapter is `name=path` or {name, path}"
