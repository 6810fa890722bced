"""PoolSpec -> vLLM server argv and environment (no process started here)."""

import json
from pathlib import Path

import pytest

from engine.pools.commands import worker_cores
from engine.pools.launcher import (
    SERVER_MODULE,
    LaunchError,
    LaunchOptions,
    build_server_command,
    parse_cpu_list,
)
from engine.vllm_fix import site_dir
from specwire import PairVersionSpec, PoolSpec, SpeculativeConfig
from specwire.engine_args import ALLOWED_ENGINE_ARGS
from tests.fixtures.vllm_flags import PATH_CLASS_OR_CODE_FLAGS, help_flags, hostile_value


def pair_version(**overrides: object) -> PairVersionSpec:
    fields: dict[str, object] = {
        "id": 7,
        "pair_name": "tiny",
        "version": 2,
        "label": "tiny-v2",
        "method": "draft_model",
        "num_speculative_tokens": 3,
        "target_ref": "/models/target",
        "draft_ref": "/models/draft",
        "draft_sample_method": "probabilistic",
    }
    fields.update(overrides)
    return PairVersionSpec.model_validate(fields)


def pool(**overrides: object) -> PoolSpec:
    fields: dict[str, object] = {
        "id": 3,
        "name": "spec-a",
        "served_model_name": "tiny",
        "target_ref": "/models/target",
        "pair_version": pair_version(),
        "engine_args": {"max-model-len": 512, "max_num_seqs": 8, "enable-prefix-caching": False},
    }
    fields.update(overrides)
    return PoolSpec.model_validate(fields)


MODELS = (Path("/models"),)


def flag_value(argv: list[str], flag: str) -> str:
    assert argv.count(flag) == 1, f"{flag} appears {argv.count(flag)} times in {argv}"
    return argv[argv.index(flag) + 1]


def test_spec_pool_on_cpu_build() -> None:
    options = LaunchOptions(python="/venv/bin/python", cpu_build=True, cpu_cores="1")
    cmd = build_server_command(pool(), 8123, options)
    argv = cmd.argv
    assert argv[:3] == ["/venv/bin/python", "-m", SERVER_MODULE]
    assert flag_value(argv, "--model") == "/models/target"
    assert flag_value(argv, "--served-model-name") == "tiny"
    assert (flag_value(argv, "--host"), flag_value(argv, "--port")) == ("127.0.0.1", "8123")
    assert json.loads(flag_value(argv, "--speculative-config")) == {
        "method": "draft_model",
        "model": "/models/draft",
        "num_speculative_tokens": 3,
        "draft_sample_method": "probabilistic",
    }
    assert flag_value(argv, "--per-request-spec-decode-metrics") == "detailed"
    assert "--enable-request-id-headers" in argv
    assert flag_value(argv, "--max-model-len") == "512"
    assert flag_value(argv, "--max-num-seqs") == "8"
    assert "--no-enable-prefix-caching" in argv
    # CPU-build defaults
    assert "--enforce-eager" in argv and flag_value(argv, "--dtype") == "float32"
    assert cmd.speculative and cmd.base_url == "http://127.0.0.1:8123"

    env = cmd.env
    assert env["PYTHONPATH"].split(":")[0] == str(site_dir())
    assert (site_dir() / "sitecustomize.py").is_file()
    assert "SPECROUTE_VLLM_FIX" not in env
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "1"
    # the whole server, not only its OpenMP threads, is confined to core 1
    assert cmd.cpu_affinity == (1,)


def test_pinning_follows_the_core_list_and_can_be_turned_off() -> None:
    pinned = build_server_command(pool(), 1, LaunchOptions(cpu_build=True, cpu_cores="0-1,3"))
    assert pinned.cpu_affinity == (0, 1, 3)
    assert pinned.env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1,3"
    loose = build_server_command(
        pool(), 1, LaunchOptions(cpu_build=True, cpu_cores="0", pin_process=False)
    )
    assert loose.cpu_affinity is None and loose.env["VLLM_CPU_OMP_THREADS_BIND"] == "0"
    assert build_server_command(pool(), 1, LaunchOptions(cpu_build=True)).cpu_affinity is None
    assert (
        build_server_command(pool(), 1, LaunchOptions(cpu_build=False, cpu_cores="0")).cpu_affinity
        is None
    )


@pytest.mark.parametrize(
    ("text", "cores"), [("0", (0,)), ("3,1", (1, 3)), ("0-2", (0, 1, 2)), ("1, 4-5", (1, 4, 5))]
)
def test_cpu_lists_parse_like_taskset(text: str, cores: tuple[int, ...]) -> None:
    assert parse_cpu_list(text) == cores


@pytest.mark.parametrize("text", ["", "a", "2-1", "-1", "1-x"])
def test_bad_cpu_lists_are_refused(text: str) -> None:
    with pytest.raises(LaunchError, match="CPU list"):
        parse_cpu_list(text)


def test_engine_up_gives_each_worker_its_own_core_round_robin() -> None:
    assert worker_cores("0,1", 3) == ["0", "1", "0"]
    assert worker_cores("1", 2) == ["1", "1"]
    # default: the cores this process may use, one per worker
    import os

    first = sorted(os.sched_getaffinity(0))[0]
    assert worker_cores(None, 1) == [str(first)]


def test_iomp_is_preloaded_from_the_interpreters_venv(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libiomp5.so").write_bytes(b"")
    options = LaunchOptions(python=str(tmp_path / "bin" / "python"), cpu_build=True)
    env = build_server_command(pool(), 8000, options).env
    assert env["LD_PRELOAD"].split(":")[0] == str(tmp_path / "lib" / "libiomp5.so")


def test_gpu_build_gets_no_cpu_defaults_and_baseline_no_speculation() -> None:
    cmd = build_server_command(
        pool(pair_version=None, engine_args={}), 9000, LaunchOptions(cpu_build=False)
    )
    assert "--speculative-config" not in cmd.argv
    assert "--per-request-spec-decode-metrics" not in cmd.argv
    assert "--enforce-eager" not in cmd.argv and "--dtype" not in cmd.argv
    assert not cmd.speculative


def test_explicit_speculative_config_wins_and_greedy_drafting_is_left_default() -> None:
    explicit = SpeculativeConfig(method="ngram", num_speculative_tokens=5)
    cmd = build_server_command(pool(speculative_config=explicit), 1, LaunchOptions(cpu_build=True))
    assert json.loads(flag_value(cmd.argv, "--speculative-config")) == {
        "method": "ngram",
        "num_speculative_tokens": 5,
    }
    greedy = pool(pair_version=pair_version(draft_sample_method="greedy"))
    config = json.loads(flag_value(build_server_command(greedy, 1).argv, "--speculative-config"))
    assert "draft_sample_method" not in config


def test_without_fix_the_child_is_told_so() -> None:
    cmd = build_server_command(pool(), 1, LaunchOptions(apply_vllm_fix=False, cpu_build=True))
    assert cmd.env["SPECROUTE_VLLM_FIX"] == "0"


@pytest.mark.parametrize("flag", ["port", "--model", "speculative_config", "api_key"])
def test_engine_args_cannot_override_launcher_flags(flag: str) -> None:
    with pytest.raises(LaunchError, match="engine_arg_reserved"):
        build_server_command(pool(engine_args={flag: "x"}), 1)


def test_draft_model_pair_without_draft_is_refused() -> None:
    with pytest.raises(LaunchError, match="no draft_ref"):
        build_server_command(pool(pair_version=pair_version(draft_ref=None)), 1)


def test_the_pair_versions_adapter_is_served_under_its_id_with_the_pools_own() -> None:
    spec = pool(
        pair_version=pair_version(adapter_id="tiny-sql", adapter_ref="/models/lora-sql"),
        engine_args={"lora-modules": ["tiny-legal=/models/lora-legal"], "max-lora-rank": 8},
    )
    argv = build_server_command(spec, 8123, LaunchOptions(cpu_build=False, model_roots=MODELS)).argv
    assert "--enable-lora" in argv
    # One flag carrying every adapter: argparse keeps only the last of repeated flags.
    assert argv.count("--lora-modules") == 1
    at = argv.index("--lora-modules")
    assert argv[at + 1 : at + 3] == ["tiny-sql=/models/lora-sql", "tiny-legal=/models/lora-legal"]
    assert flag_value(argv, "--max-lora-rank") == "8"


def test_a_baseline_pool_serves_its_lora_modules_and_no_adapter_means_no_lora() -> None:
    base = pool(
        pair_version=None,
        engine_args={"lora-modules": [{"name": "tiny-sql", "path": "/models/lora-sql"}]},
    )
    argv = build_server_command(base, 8123, LaunchOptions(cpu_build=False, model_roots=MODELS)).argv
    assert json.loads(flag_value(argv, "--lora-modules")) == {
        "name": "tiny-sql",
        "path": "/models/lora-sql",
    }
    assert "--enable-lora" in argv
    plain = build_server_command(
        pool(), 8123, LaunchOptions(cpu_build=False, model_roots=MODELS)
    ).argv
    assert "--enable-lora" not in plain and "--lora-modules" not in plain


def test_an_adapter_id_without_its_path_cannot_launch() -> None:
    with pytest.raises(LaunchError, match="adapter_ref"):
        build_server_command(pool(pair_version=pair_version(adapter_id="tiny-sql")), 8123)


@pytest.mark.parametrize(
    "flag", sorted(PATH_CLASS_OR_CODE_FLAGS | (help_flags() - set(ALLOWED_ENGINE_ARGS)))
)
def test_the_launcher_refuses_every_flag_outside_the_allow_list(flag: str) -> None:
    """Defence in depth: a spec whose engine_args got into the database some other way
    (a hand-edited row, an older control) still cannot reach vLLM's command line."""
    spec = pool(engine_args={"max-model-len": 512, flag: hostile_value(flag)})
    with pytest.raises(LaunchError, match=f"--{flag}"):
        build_server_command(spec, 1, LaunchOptions(cpu_build=True, model_roots=MODELS))


def test_the_launcher_confines_adapters_to_its_model_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = pool(engine_args={"lora-modules": [f"a={tmp_path}/a"]})
    with pytest.raises(LaunchError, match="engine_arg_outside_model_roots"):
        build_server_command(spec, 1, LaunchOptions(cpu_build=True, model_roots=MODELS))
    # Unset: $SPECROUTE_MODEL_ROOTS, as control reads it.
    monkeypatch.setenv("SPECROUTE_MODEL_ROOTS", json.dumps([str(tmp_path)]))
    argv = build_server_command(spec, 1, LaunchOptions(cpu_build=True)).argv
    assert flag_value(argv, "--lora-modules") == f"a={tmp_path}/a"
    monkeypatch.setenv("SPECROUTE_MODEL_ROOTS", "/not-json")
    with pytest.raises(LaunchError, match="SPECROUTE_MODEL_ROOTS"):
        build_server_command(spec, 1, LaunchOptions(cpu_build=True))
