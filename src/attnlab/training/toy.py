"""The tutorial's toy: one self-attention layer taught to reconstruct its own input.

Two short Chinese sentences, padded to four tokens::

    寫 代碼 的 中年人          ("the middle-aged man who writes code")
    天天 寫 代碼 <PAD>        ("writes code every day")

Each token has a fixed random 16-d embedding. One trainable self-attention layer (``W_query``,
``W_key``, ``W_value`` and ``out_proj``, i.e. :class:`attnlab.attention.MultiHeadAttention` with
one head and no causal mask) is trained with Adam (lr 1e-3, 200 full-batch epochs) to output the
embeddings it was given (MSE). The embeddings are the targets, so they are frozen: trainable
targets would let both sides collapse to zero.

The tutorial lets ``<PAD>`` take part like any word, so real tokens attend to padding. The fixed
variant (``mask_padding=True``) masks ``<PAD>`` as a key and leaves the padded position out of the
loss; :func:`run_toy` trains both from the same seed so their heatmaps can be compared.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab.attention import MultiHeadAttention

VOCAB = ["寫", "代碼", "的", "中年人", "天天", "<PAD>"]
PAD = VOCAB.index("<PAD>")
SENTENCES = [["寫", "代碼", "的", "中年人"], ["天天", "寫", "代碼", "<PAD>"]]
GLOSS = {"寫": "write", "代碼": "code", "的": "'s", "中年人": "mid-aged man", "天天": "every day", "<PAD>": "<PAD>"}


@dataclass(frozen=True)
class ToyResult:
    """What one toy run produced: ``losses[e]`` after epoch ``e + 1``; weights ``(2, 4, 4)`` (sentence, query, key)."""

    mask_padding: bool
    losses: list[float]
    weights: Tensor


def token_ids() -> Tensor:
    """The two sentences as ids ``(2, 4)``."""
    return torch.tensor([[VOCAB.index(w) for w in s] for s in SENTENCES])


class ToyAttention(nn.Module):
    """A frozen embedding followed by one single-head, non-causal self-attention layer."""

    def __init__(self, embed_dim: int = 16) -> None:
        super().__init__()
        self.embedding = nn.Embedding(len(VOCAB), embed_dim)
        self.embedding.weight.requires_grad_(False)
        self.attention = MultiHeadAttention(embed_dim, embed_dim, num_heads=1, causal=False)

    def forward(self, ids: Tensor, attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """ids ``(B, T)`` -> (output ``(B, T, D)``, embeddings ``(B, T, D)``, weights ``(B, T, T)``)."""
        x = self.embedding(ids)
        out, weights = self.attention(x, attention_mask, return_weights=True)
        return out, x, weights[:, 0]


@contextlib.contextmanager
def one_thread():
    """Run on one thread: (2, 4, 16) tensors gain nothing from more, and on a busy machine lose much."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_toy(mask_padding: bool, seed: int = 123, epochs: int = 200, lr: float = 1e-3, embed_dim: int = 16,
              log: Callable[[int, float], None] | None = None, log_every: int = 20) -> ToyResult:
    """Train the toy layer; ``log(epoch, loss)`` is called every ``log_every`` epochs."""
    torch.manual_seed(seed)
    model = ToyAttention(embed_dim)
    ids = token_ids()
    real = (ids != PAD).long()  # (B, T) 1 = real token
    mask = real if mask_padding else None
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    losses = []
    with torch.enable_grad(), one_thread():
        for epoch in range(1, epochs + 1):
            out, target, _ = model(ids, mask)
            err = (out - target).pow(2).mean(dim=-1)  # (B, T)
            loss = err.mean() if not mask_padding else (err * real).sum() / real.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if log is not None and epoch % log_every == 0:
                log(epoch, loss.item())
    with torch.no_grad():
        _, _, weights = model(ids, mask)
    return ToyResult(mask_padding, losses, weights)


def run_toy(seed: int = 123, log: Callable[[str, int, float], None] | None = None) -> list[ToyResult]:
    """Both variants from the same seed: the tutorial's (padding attended) and the fixed one."""
    return [train_toy(masked, seed, log=None if log is None else (lambda e, v, m=masked: log(
        "masked" if m else "unmasked", e, v))) for masked in (False, True)]
