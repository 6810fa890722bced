"""Pair artifact checks on the bundled pair and on deliberately broken copies of it."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.tiny.tokenizer import save_tokenizer, train_tokenizer
from specwire.artifacts import (
    ArtifactError,
    IncompatiblePairError,
    MissingArtifactError,
    UnsupportedArchitectureError,
    check_eagle_head,
    check_pair,
    inspect_model,
    tokenizer_fingerprint,
)

PAIR = Path(__file__).resolve().parents[2] / "engine" / "tiny_pair"
TARGET, DRAFT, EAGLE = PAIR / "target", PAIR / "draft", PAIR / "eagle"


@pytest.fixture
def draft_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "draft"
    shutil.copytree(DRAFT, dst)
    return dst


def test_bundled_pair_passes() -> None:
    check = check_pair(TARGET, DRAFT)
    assert check.vocab_size == 4096
    assert check.tokenizer_hash == check.target.tokenizer_hash == check.draft.tokenizer_hash
    assert len(check.tokenizer_hash) == 64
    assert check.chat_template_hash is not None
    assert check.target.architecture.head_dim == check.draft.architecture.head_dim == 64
    assert check.target.architecture.architectures == ("LlamaForCausalLM",)
    assert check.target.architecture.num_hidden_layers > check.draft.architecture.num_hidden_layers
    assert set(check.target.weight_digests) == {"model.safetensors"}
    assert check.warnings == []


def test_digests_are_stable_and_follow_weight_bytes(draft_copy: Path) -> None:
    first = inspect_model(draft_copy)
    second = inspect_model(draft_copy)
    assert first.weight_digests == second.weight_digests
    assert first.weights_digest == second.weights_digest
    assert first.weight_digests == inspect_model(DRAFT).weight_digests

    weights = draft_copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # one bit of the last tensor value
    weights.write_bytes(bytes(data))
    changed = inspect_model(draft_copy)
    assert changed.weight_digests["model.safetensors"] != first.weight_digests["model.safetensors"]
    assert changed.weights_digest != first.weights_digest
    # The tokenizer did not change, so its hash must not either.
    assert changed.tokenizer_hash == first.tokenizer_hash


def test_digest_matches_sha256sum(draft_copy: Path) -> None:
    out = subprocess.run(
        ["sha256sum", str(draft_copy / "model.safetensors")], capture_output=True, text=True
    )
    if out.returncode != 0:
        pytest.skip("sha256sum not available")
    assert inspect_model(draft_copy).weight_digests["model.safetensors"] == out.stdout.split()[0]


def test_pair_with_different_tokenizer_is_refused(draft_copy: Path) -> None:
    texts = ["def add(a, b):\n    return a + b\n", "The quick brown fox jumps.\n"] * 50
    other = train_tokenizer(texts, vocab_size=300)
    save_tokenizer(other, draft_copy, model_max_length=1024)

    with pytest.raises(IncompatiblePairError) as info:
        check_pair(TARGET, draft_copy)
    assert info.value.mismatch == "tokenizer_hash"
    assert "tokenizer hash differs" in str(info.value)
    body = info.value.to_error_body()
    assert body["error"]["code"] == "pair_incompatible"
    assert body["error"]["param"] == "draft_ref"
    assert "tokenizer" in body["error"]["message"]


def test_same_tokenizer_reformatted_hashes_the_same(draft_copy: Path) -> None:
    # Key order, indentation and the merges encoding are presentation, not content.
    path = draft_copy / "tokenizer.json"
    tok = json.loads(path.read_text())
    tok["model"]["merges"] = [
        m.split(" ") if isinstance(m, str) else m for m in tok["model"]["merges"]
    ]
    path.write_text(json.dumps(dict(reversed(list(tok.items()))), indent=4))
    assert tokenizer_fingerprint(draft_copy)[0] == tokenizer_fingerprint(TARGET)[0]
    check_pair(TARGET, draft_copy)


def test_changed_special_token_changes_the_hash(draft_copy: Path) -> None:
    path = draft_copy / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["eos_token"] = "<|im_end|>"
    path.write_text(json.dumps(config))
    path_map = draft_copy / "special_tokens_map.json"
    special = json.loads(path_map.read_text())
    special["eos_token"] = "<|im_end|>"
    path_map.write_text(json.dumps(special))
    with pytest.raises(IncompatiblePairError) as info:
        check_pair(TARGET, draft_copy)
    assert info.value.mismatch == "tokenizer_hash"


def test_different_vocab_size_is_refused(draft_copy: Path) -> None:
    path = draft_copy / "config.json"
    config = json.loads(path.read_text())
    config["vocab_size"] = 8192
    path.write_text(json.dumps(config))
    with pytest.raises(IncompatiblePairError) as info:
        check_pair(TARGET, draft_copy)
    assert info.value.mismatch == "vocab_size"
    assert "4096" in str(info.value) and "8192" in str(info.value)


def test_missing_weights_are_named(draft_copy: Path) -> None:
    (draft_copy / "model.safetensors").unlink()
    with pytest.raises(MissingArtifactError) as info:
        check_pair(TARGET, draft_copy)
    assert info.value.mismatch == "missing_files"
    assert info.value.param == "draft_ref"


def test_missing_tokenizer_is_named(draft_copy: Path) -> None:
    (draft_copy / "tokenizer.json").unlink()
    with pytest.raises(MissingArtifactError, match=r"tokenizer\.json"):
        check_pair(TARGET, draft_copy)


def test_unsupported_head_dim_is_refused(draft_copy: Path) -> None:
    path = draft_copy / "config.json"
    config = json.loads(path.read_text())
    config["head_dim"] = 48
    path.write_text(json.dumps(config))
    with pytest.raises(UnsupportedArchitectureError) as info:
        check_pair(TARGET, draft_copy)
    assert info.value.mismatch == "head_dim"
    assert "48" in str(info.value)
    # A GPU deployment may allow it.
    check_pair(TARGET, draft_copy, supported_head_dims=frozenset({48, 64}))


def test_artifacts_import_without_heavy_libraries() -> None:
    code = (
        "import sys, specwire.artifacts; "
        "heavy = [m for m in ('torch', 'transformers', 'vllm') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _write_safetensors_header(path: Path, shapes: dict[str, list[int]]) -> None:
    """A safetensors file whose header names `shapes` (zero-filled fp16 data)."""
    header: dict[str, object] = {}
    offset = 0
    for name, shape in shapes.items():
        size = 2 * math.prod(shape)
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(offset))


def test_the_bundled_eagle_head_fits_its_target() -> None:
    check = check_eagle_head(TARGET, EAGLE)
    assert check.layers == 1
    assert len(check.head_digest) == 64
    assert check.target.architecture.hidden_size == 256


def test_an_eagle_head_of_another_width_or_fc_is_refused(tmp_path: Path) -> None:
    config = json.loads((TARGET / "config.json").read_text()) | {"num_hidden_layers": 1}
    head = tmp_path / "head"
    head.mkdir()
    (head / "config.json").write_text(json.dumps(config))
    _write_safetensors_header(head / "model.safetensors", {"fc.weight": [256, 256]})
    with pytest.raises(IncompatiblePairError) as fc:
        check_eagle_head(TARGET, head)
    assert fc.value.mismatch == "eagle_fc"
    assert fc.value.param == "draft_ref"
    _write_safetensors_header(head / "model.safetensors", {"fc.weight": [256, 512]})
    assert check_eagle_head(TARGET, head).layers == 1
    (head / "config.json").write_text(json.dumps(config | {"hidden_size": 128}))
    with pytest.raises(IncompatiblePairError) as width:
        check_eagle_head(TARGET, head)
    assert width.value.mismatch == "hidden_size"
    (head / "model.safetensors").write_bytes(b"\xff" * 8)
    (head / "config.json").write_text(json.dumps(config))
    with pytest.raises(ArtifactError, match="header"):
        check_eagle_head(TARGET, head)
