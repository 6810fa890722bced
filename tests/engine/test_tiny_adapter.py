"""The tiny target's LoRA adapters: the layers, the PEFT files vLLM loads, and the
committed `rot13` adapter, whose collapse of the draft's acceptance is re-measured
offline with the pair's own evaluator."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import LlamaForCausalLM

from engine.pools.launcher import LaunchOptions, build_server_command
from engine.tiny.adapter import TrainAdapterSettings, load_model, train_adapter
from engine.tiny.corpus import build_corpus
from engine.tiny.evaluate import estimate_greedy
from engine.tiny.lora import (
    CONFIG_FILE,
    LLAMA_LINEAR_MODULES,
    PEFT_PREFIX,
    WEIGHTS_FILE,
    LoraShape,
    add_lora,
    load_lora,
    merge_lora,
    save_lora,
)
from engine.tiny.measure import pool_spec
from engine.tiny.models import build_model, logits_of
from engine.tiny.shapes import ModelShape
from engine.tiny.styles import REPORT_FILE, adapter_dir, rot13, styled_prompts

PAIR = Path(__file__).resolve().parents[2] / "engine" / "tiny_pair"
ROT13 = adapter_dir(PAIR, "rot13")
MAX_ADAPTER_BYTES = 2 * 1024 * 1024
SHAPE = ModelShape(hidden_size=64, num_hidden_layers=2, intermediate_size=96)


def _tiny() -> LlamaForCausalLM:
    return build_model(SHAPE, vocab_size=50, max_positions=32, eos_id=0, seed=3)


def test_a_fresh_adapter_changes_nothing_and_a_trained_one_merges_exactly(
    tmp_path: Path,
) -> None:
    model = _tiny()
    ids = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(0))
    before = logits_of(model, ids)
    wrapped = add_lora(model, LoraShape(rank=4, alpha=8), seed=1)
    assert len(wrapped) == 2 * len(LLAMA_LINEAR_MODULES)
    # B starts at zero: the adapted model is the base model exactly.
    torch.testing.assert_close(logits_of(model, ids), before, rtol=0, atol=0)
    assert all(not p.requires_grad for n, p in model.named_parameters() if "lora_" not in n)
    g = torch.Generator().manual_seed(2)
    for layer in wrapped.values():
        layer.lora_B.data = torch.randn(layer.lora_B.shape, generator=g) * 0.1
    adapted = logits_of(model, ids)
    assert (adapted - before).abs().max() > 1e-3
    save_lora(wrapped, LoraShape(rank=4, alpha=8), tmp_path, base_model="base")
    # Loading the saved files onto a fresh copy gives the same model (fp16 storage).
    reloaded = _tiny()
    load_lora(reloaded, tmp_path)
    torch.testing.assert_close(logits_of(reloaded, ids), adapted, rtol=0, atol=2e-3)
    merge_lora(model, wrapped)
    torch.testing.assert_close(logits_of(model, ids), adapted, rtol=1e-5, atol=1e-5)
    assert not any("lora_" in n for n, _ in model.named_parameters())


def test_the_committed_adapter_is_a_small_peft_lora_for_every_linear_layer() -> None:
    config = json.loads((ROT13 / CONFIG_FILE).read_text())
    assert (config["peft_type"], config["task_type"], config["r"]) == ("LORA", "CAUSAL_LM", 8)
    assert sorted(config["target_modules"]) == sorted(LLAMA_LINEAR_MODULES)
    assert not Path(config["base_model_name_or_path"]).is_absolute()
    weights = ROT13 / WEIGHTS_FILE
    assert weights.stat().st_size < MAX_ADAPTER_BYTES
    tensors = load_file(str(weights))
    target = json.loads((PAIR / "target" / "config.json").read_text())
    layers = target["num_hidden_layers"]
    assert len(tensors) == layers * len(LLAMA_LINEAR_MODULES) * 2
    a = tensors[f"{PEFT_PREFIX}model.layers.0.self_attn.q_proj.lora_A.weight"]
    b = tensors[f"{PEFT_PREFIX}model.layers.0.mlp.down_proj.lora_B.weight"]
    assert a.shape == (8, target["hidden_size"]) and b.shape == (target["hidden_size"], 8)
    assert a.dtype == torch.float16


def test_rot13_style_round_trips_and_styles_the_held_out_prompts() -> None:
    assert rot13(rot13("def f(x):\n    return x")) == "def f(x):\n    return x"
    assert rot13("Hello") == "Uryyb"
    prompts = styled_prompts(build_corpus(), "code", 3, "rot13")
    assert len(prompts) == 3 and all(rot13(p) != p for p in prompts)


def test_the_committed_adapter_collapses_the_drafts_acceptance_offline() -> None:
    """The model card's claim, re-measured on 4 prompts of the adapter's tenant: the
    unadapted draft follows the unadapted target (mean length > 2) but not the adapted
    one (< 1.4)."""
    torch.set_num_threads(2)
    target, draft = load_model(PAIR / "target"), load_model(PAIR / "draft")
    tok_ids = _prompt_ids(styled_prompts(build_corpus(), "code", 4, "rot13"))
    unadapted = estimate_greedy(target, draft, tok_ids, 3, 32)
    load_lora(target, ROT13)
    adapted = estimate_greedy(target, draft, tok_ids, 3, 32)
    assert unadapted.mean_acceptance_length > 2.0, unadapted
    assert adapted.mean_acceptance_length < 1.4, adapted


def _prompt_ids(texts: list[str]) -> list[torch.Tensor]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(PAIR / "target" / "tokenizer.json"))
    return [torch.tensor(tok.encode(t).ids, dtype=torch.int64) for t in texts]


def test_the_measured_pool_serves_the_adapter_under_its_name_beside_the_draft() -> None:
    spec = pool_spec(PAIR, 3, "probabilistic", adapter="rot13")
    argv = build_server_command(spec, 8199, LaunchOptions(cpu_build=True)).argv
    assert "--enable-lora" in argv and "--speculative-config" in argv
    assert argv[argv.index("--lora-modules") + 1] == f"rot13={ROT13}"
    assert "--lora-modules" not in build_server_command(pool_spec(PAIR, 3, "greedy"), 1).argv


def test_the_training_run_writes_a_loadable_adapter_and_its_report(tmp_path: Path) -> None:
    """train-tiny-adapter's pipeline, two steps on short windows (seconds)."""
    for role in ("target", "draft"):
        (tmp_path / role).symlink_to(PAIR / role)
    report = train_adapter(
        TrainAdapterSettings(
            pair_dir=tmp_path, name="smoke", steps=2, eval_prompts=2, eval_new_tokens=8, seq_len=32
        ),
        log=lambda _line: None,
    )
    out = adapter_dir(tmp_path, "smoke")
    assert json.loads((out / REPORT_FILE).read_text()) == report
    assert report["steps"] == 2 and report["adapter_bytes"] == (out / WEIGHTS_FILE).stat().st_size
    for which in ("unadapted", "adapted"):
        assert set(report["offline_acceptance"][which]) == {
            "code_t0",
            "code_t1.0",
            "prose_t0",
            "prose_t1.0",
        }
    assert "pair_dir" not in report["settings"]  # no machine's paths in a committed report
    load_lora(load_model(PAIR / "target"), out)
