"""The committed tiny pair and the pieces that built it: corpus split, tokenizer, files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from engine.tiny.corpus import Corpus, build_corpus, is_held_out
from engine.tiny.prompts import held_out_prompts
from engine.tiny.tokenizer import EOS, TOKENIZER_FILES

PAIR = Path(__file__).resolve().parents[2] / "engine" / "tiny_pair"
MAX_COMMITTED_BYTES = 40 * 1024 * 1024
HF_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return build_corpus()


def test_split_is_by_name_and_disjoint(corpus: Corpus) -> None:
    train_names = {d.name for d in corpus.train}
    held_names = {d.name for d in corpus.held_out}
    assert not train_names & held_names
    assert all(is_held_out(n) for n in held_names)
    assert not any(is_held_out(n) for n in train_names)
    summary = corpus.summary()
    for part in ("train_code", "train_prose", "held_out_code", "held_out_prose"):
        assert summary[part]["documents"] > 0, part
    # About 1 in 20 documents is held out.
    share = len(held_names) / (len(held_names) + len(train_names))
    assert 0.02 < share < 0.10


def test_held_out_prompts_are_held_out_text(corpus: Corpus) -> None:
    code = held_out_prompts(corpus, "code", 20)
    prose = held_out_prompts(corpus, "prose", 20)
    assert len(code) == 20 and len(prose) >= 10
    held_text = "".join(d.text for d in corpus.held_out)
    assert all(p in held_text for p in code + prose)
    assert all(p.endswith("\n") for p in code)  # cut at line ends
    assert held_out_prompts(corpus, "code", 20) == code  # deterministic


@pytest.mark.parametrize("role", ["target", "draft"])
def test_pair_directories_have_the_hf_files(role: str) -> None:
    present = {p.name for p in (PAIR / role).iterdir()}
    assert set(HF_FILES) <= present
    config = json.loads((PAIR / role / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["head_dim"] == 64
    assert config["hidden_size"] == 64 * config["num_attention_heads"]


def test_both_models_share_byte_identical_tokenizer_files() -> None:
    for name in TOKENIZER_FILES:
        assert (PAIR / "target" / name).read_bytes() == (PAIR / "draft" / name).read_bytes(), name


def test_weights_fit_the_size_budget_and_the_draft_is_much_smaller() -> None:
    target = (PAIR / "target" / "model.safetensors").stat().st_size
    draft = (PAIR / "draft" / "model.safetensors").stat().st_size
    assert target + draft <= MAX_COMMITTED_BYTES
    assert draft * 4 < target


def test_tokenizer_round_trips_held_out_code_and_frames_documents(corpus: Corpus) -> None:
    tok = Tokenizer.from_file(str(PAIR / "target" / "tokenizer.json"))
    assert tok.get_vocab_size() == 4096
    eos = tok.token_to_id(EOS)
    n_bytes = n_tokens = 0
    for doc in corpus.of_kind("held_out", "code")[:8]:
        ids = tok.encode(doc.text).ids
        assert ids[0] == eos  # the post-processor starts every sequence with the separator
        assert tok.decode(ids, skip_special_tokens=True) == doc.text
        n_bytes += len(doc.text.encode())
        n_tokens += len(ids)
    # Byte-level BPE trained on code should compress it well beyond one byte per token.
    assert n_bytes / n_tokens > 2.5


def test_transformers_loads_the_tokenizer_with_its_chat_template() -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(PAIR / "target")
    text = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    assert text == "<|endoftext|><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == EOS
    assert tok("x = 1\n")["input_ids"][0] == tok.convert_tokens_to_ids(EOS)
