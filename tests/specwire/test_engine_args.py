"""The engine-argument allow-list (specwire.engine_args) against vLLM 0.32's
own flag list: every allowed flag exists, none of them takes a path, class or code
(lora-modules aside, whose paths are confined), and everything else is refused."""

from pathlib import Path

import pytest

from specwire.engine_args import (
    ALLOWED_ENGINE_ARGS,
    RESERVED_ENGINE_FLAGS,
    EngineArgRefused,
    check_engine_args,
)
from tests.fixtures.vllm_flags import PATH_CLASS_OR_CODE_FLAGS, help_flags, hostile_value, negatable

ROOTS = [Path("/models")]


def test_every_allowed_flag_is_a_flag_of_vllm_0_32() -> None:
    flags = help_flags()
    assert len(flags) > 300  # the whole usage text was read
    assert sorted(set(ALLOWED_ENGINE_ARGS) - flags) == []
    assert sorted(RESERVED_ENGINE_FLAGS - flags) == []
    assert sorted(PATH_CLASS_OR_CODE_FLAGS - flags) == []


def test_only_lora_modules_of_the_path_class_or_code_flags_is_allowed() -> None:
    assert sorted(PATH_CLASS_OR_CODE_FLAGS & set(ALLOWED_ENGINE_ARGS)) == ["lora-modules"]
    assert not RESERVED_ENGINE_FLAGS & set(ALLOWED_ENGINE_ARGS)


def test_allowed_switches_are_switches_in_vllm() -> None:
    """A bool renders as --X / --no-X: vLLM must have both, except the one flag that
    only accepts true."""
    switches = [f for f, spec in ALLOWED_ENGINE_ARGS.items() if spec.kind == "bool"]
    assert [f for f in switches if not negatable(f)] == ["disable-log-stats"]
    with pytest.raises(EngineArgRefused, match="can only be true"):
        check_engine_args({"disable-log-stats": False}, model_roots=ROOTS)


@pytest.mark.parametrize("flag", sorted(help_flags() - set(ALLOWED_ENGINE_ARGS)))
def test_every_other_flag_is_refused_in_any_spelling(flag: str) -> None:
    expected = "engine_arg_reserved" if flag in RESERVED_ENGINE_FLAGS else "engine_arg_not_allowed"
    for key in (flag, f"--{flag}", flag.replace("-", "_")):
        with pytest.raises(EngineArgRefused) as refused:
            check_engine_args({key: hostile_value(flag)}, model_roots=ROOTS)
        assert (refused.value.flag, refused.value.code) == (flag, expected)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({"max-model-len": "512 --trust-remote-code"}, "engine_arg_invalid"),
        ({"max-model-len": True}, "engine_arg_invalid"),
        ({"max-model-len": 10**9}, "engine_arg_invalid"),
        ({"max-model-len": 10**400}, "engine_arg_invalid"),
        ({"gpu-memory-utilization": float("nan")}, "engine_arg_invalid"),
        ({"gpu-memory-utilization": 1.5}, "engine_arg_invalid"),
        ({"dtype": "--trust-remote-code"}, "engine_arg_invalid"),
        ({"quantization": "-x"}, "engine_arg_invalid"),
        ({"enforce-eager": "yes"}, "engine_arg_invalid"),
        ({"max-lora-rank": 7}, "engine_arg_invalid"),
        ({"max_num_seqs": 8, "max-num-seqs": 9}, "engine_arg_invalid"),
        ({"lora-modules": ["x=/models/a", "--trust-remote-code"]}, "engine_arg_invalid"),
        ({"lora-modules": ["--trust-remote-code=/models/a"]}, "engine_arg_invalid"),
        (
            {"lora-modules": [{"name": "x", "path": "/models/a", "base_model_name": "y"}]},
            "engine_arg_invalid",
        ),
        ({"lora-modules": ["x=/models/../etc"]}, "engine_arg_outside_model_roots"),
        ({"lora-modules": ['{"name": "x", "path": "/etc"}']}, "engine_arg_outside_model_roots"),
        ({"lora-modules": "x=/etc"}, "engine_arg_outside_model_roots"),
        ({"lora-modules": []}, "engine_arg_invalid"),
    ],
)
def test_values_are_typed_and_bounded(args: dict[str, object], code: str) -> None:
    with pytest.raises(EngineArgRefused) as refused:
        check_engine_args(args, model_roots=ROOTS)
    assert refused.value.code == code


def test_a_symlink_out_of_the_model_roots_is_outside(tmp_path: Path) -> None:
    root = tmp_path / "models"
    root.mkdir()
    (root / "escape").symlink_to("/etc")
    with pytest.raises(EngineArgRefused) as refused:
        check_engine_args({"lora-modules": [f"x={root}/escape"]}, model_roots=[root])
    assert refused.value.code == "engine_arg_outside_model_roots"
    check_engine_args({"lora-modules": [f"x={root}/adapter"]}, model_roots=[root])


def test_typical_pool_arguments_pass() -> None:
    check_engine_args(
        {
            "max-model-len": 512,
            "max_num_seqs": 8,
            "--enforce-eager": True,
            "enable-prefix-caching": False,
            "dtype": "float32",
            "gpu-memory-utilization": 0.9,
            "max-lora-rank": 8,
            "lora-modules": ["a=/models/a", {"name": "b", "path": "/models/b"}],
        },
        model_roots=ROOTS,
    )
