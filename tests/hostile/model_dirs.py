"""Model directories that are broken in one way each, for pair registration."""

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specwire.artifacts import BUNDLED_PAIR_DIR


def _edit_json(path: Path, change: Callable[[Any], Any]) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda doc: {**doc, key: value}


def _vocab_id(doc: dict[str, Any]) -> dict[str, Any]:
    doc["model"]["vocab"]["hostile-piece"] = "not-an-integer"
    return doc


# name -> (file to break, how, the file and field the 422 must name)
BREAKAGES: dict[str, tuple[str, Callable[[Path], object], str]] = {
    "zero_heads": (
        "config.json",
        lambda p: _edit_json(p, _set("num_attention_heads", 0)),
        "num_attention_heads",
    ),
    "special_map_not_json": (
        "special_tokens_map.json",
        lambda p: p.write_text("{not json"),
        "special_tokens_map.json",
    ),
    "added_tokens_ints": (
        "tokenizer.json",
        lambda p: _edit_json(p, _set("added_tokens", [1, 2, 3])),
        "added_tokens[0]",
    ),
    "vocab_id_not_int": ("tokenizer.json", lambda p: _edit_json(p, _vocab_id), "model.vocab"),
    "architectures_ints": (
        "config.json",
        lambda p: _edit_json(p, _set("architectures", [1])),
        "architectures",
    ),
    "special_map_list": (
        "special_tokens_map.json",
        lambda p: p.write_text("[1]"),
        "special_tokens_map.json",
    ),
    "config_infinity": (
        "config.json",
        lambda p: p.write_text(
            json.dumps({**json.loads(p.read_text()), "hidden_size": "INF"}).replace(
                '"INF"', "Infinity"
            )
        ),
        "hidden_size",
    ),
}


def write_broken_drafts(root: Path) -> dict[str, Path]:
    """One copy of the bundled draft per breakage under `root` (config and tokenizer
    files copied, weights linked, so it is cheap)."""
    source = BUNDLED_PAIR_DIR / "draft"
    out = {}
    for name, (file, breaker, _) in BREAKAGES.items():
        target = root / name
        target.mkdir(parents=True, exist_ok=True)
        for item in source.iterdir():
            if item.is_file() and item.suffix == ".json":
                shutil.copy(item, target / item.name)
            elif item.is_file() and not (target / item.name).exists():
                (target / item.name).symlink_to(item)
        breaker(target / file)
        out[name] = target
    return out
