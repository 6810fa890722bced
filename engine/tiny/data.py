"""Token streams and reproducible batches of fixed-length windows."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tokenizers import Tokenizer

from engine.tiny.corpus import Document


@dataclass
class TokenStream:
    """All documents of one kind, concatenated; each starts with the EOS separator."""

    ids: torch.Tensor  # [n_tokens] int64

    @classmethod
    def from_documents(cls, tok: Tokenizer, docs: list[Document]) -> TokenStream:
        encodings = tok.encode_batch([d.text for d in docs])
        flat = [i for enc in encodings for i in enc.ids]
        return cls(torch.tensor(flat, dtype=torch.int64))

    def __len__(self) -> int:
        return int(self.ids.numel())


class WindowSampler:
    """Random windows of ``seq_len + 1`` tokens, mixing two streams at a fixed ratio."""

    def __init__(
        self,
        code: TokenStream,
        prose: TokenStream,
        seq_len: int,
        prose_fraction: float,
        seed: int,
    ) -> None:
        assert len(code) > seq_len + 1 and len(prose) > seq_len + 1
        self.code, self.prose = code, prose
        self.seq_len = seq_len
        self.prose_fraction = prose_fraction
        self.generator = torch.Generator().manual_seed(seed)

    def batch(self, batch_size: int) -> torch.Tensor:
        """Return [batch, seq_len + 1] int64 token windows."""
        rows = []
        picks = torch.rand(batch_size, generator=self.generator) < self.prose_fraction
        for is_prose in picks.tolist():
            stream = self.prose if is_prose else self.code
            start = int(
                torch.randint(0, len(stream) - self.seq_len - 1, (1,), generator=self.generator)
            )
            rows.append(stream.ids[start : start + self.seq_len + 1])
        return torch.stack(rows)


def fixed_windows(stream: TokenStream, seq_len: int, count: int) -> torch.Tensor:
    """Evenly spaced, non-overlapping windows for held-out evaluation: [count, seq_len + 1]."""
    span = seq_len + 1
    available = len(stream) // span
    assert available > 0, "held-out stream shorter than one window"
    count = min(count, available)
    stride = available // count
    rows = [stream.ids[i * stride * span : i * stride * span + span] for i in range(count)]
    return torch.stack(rows)
