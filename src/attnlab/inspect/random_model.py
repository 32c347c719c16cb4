"""A seeded random model for looking at one attention layer: words in, attention out.

Nothing here is trained. Each word (whitespace-separated; in Chinese or Japanese written without spaces, each
character: :func:`attnlab.data.words.split_words`) gets a fixed random embedding (seeded by the word itself, so
"爱" has the same vector wherever it stands), the sinusoidal encoding of its position is added, and one of the
four mechanisms of :mod:`attnlab.attention` attends over the result.
That is enough to show every number of the arithmetic on any sentence, in any script.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from attnlab.attention import CausalAttention, MultiHeadAttention, SelfAttentionV2, SimpleSelfAttention
from attnlab.data.words import split_words
from attnlab.i18n import tr
from attnlab.inspect.names import RANDOM
from attnlab.layers.positional import sinusoidal_table

Mechanism = Literal["simple", "scaled", "causal", "multihead"]
MECHANISMS: tuple[str, ...] = ("simple", "scaled", "causal", "multihead")


@dataclass
class RandomModelConfig:
    """What the random model looks like.

    Args:
        mechanism: ``simple`` (softmax(X Xᵀ) X), ``scaled`` (W_q, W_k, W_v, ÷√d_k), ``causal``
            (scaled, no look-ahead) or ``multihead`` (causal, ``num_heads`` heads and ``out_proj``).
        d_model: embedding width.
        d_k: width of a query/key/value (per head for ``multihead``).
        num_heads: heads of the ``multihead`` mechanism (1 for the others).
        context_length: the longest sentence, in words, the model accepts.
        seed: seeds the projections and the word embeddings.
    """

    mechanism: str = "scaled"
    d_model: int = 8
    d_k: int = 4
    num_heads: int = 2
    context_length: int = 64
    seed: int = 123

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(tr("RandomModelConfig: mechanism must be one of {mechanisms}, got {mechanism!r}",
                                mechanisms=', '.join(MECHANISMS), mechanism=self.mechanism))
        for name in ("d_model", "d_k", "num_heads", "context_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(tr("RandomModelConfig: {name} must be a positive integer, got {value!r}", name=name,
                                    value=value))
        if self.d_model % 2:
            raise ValueError(tr("RandomModelConfig: d_model must be even (sin/cos pairs), got {d_model}",
                                d_model=self.d_model))


def word_embedding(word: str, d_model: int, seed: int) -> Tensor:
    """A fixed random vector for ``word`` ``(d_model,)``: N(0, 1) seeded by (seed, crc32 of the word)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(word.encode("utf-8")))
    return torch.randn(d_model, generator=g)


class RandomModel(nn.Module):
    """Words -> seeded embeddings + positions -> one attention layer.

    ``forward(x (B, T, d_model), return_weights)`` is the attention module's own forward.
    """

    def __init__(self, config: RandomModelConfig | None = None) -> None:
        super().__init__()
        self.config = c = config or RandomModelConfig()
        torch.manual_seed(c.seed)  # the projections' initial weights come from here
        if c.mechanism == "simple":
            self.attn: nn.Module = SimpleSelfAttention()
        elif c.mechanism == "scaled":
            self.attn = SelfAttentionV2(c.d_model, c.d_k)
        elif c.mechanism == "causal":
            self.attn = CausalAttention(c.d_model, c.d_k, c.context_length, dropout=0.0)
        else:
            self.attn = MultiHeadAttention(c.d_model, c.d_k * c.num_heads, c.context_length, num_heads=c.num_heads,
                                           is_causal=True)
        self.eval()

    @property
    def name(self) -> str:
        """A label that never changes with the reader's language (it is data: ``--json`` prints it);
        :func:`~attnlab.inspect.names.shown_name` gives it in the reader's language."""
        return RANDOM.format(mechanism=self.config.mechanism, seed=self.config.seed)

    def tokenize(self, text: str) -> list[str]:
        """The words of ``text`` (:func:`~attnlab.data.words.split_words`: on whitespace, and character by character
        in unspaced Chinese); an empty text or one longer than ``context_length`` is an error."""
        if not isinstance(text, str):
            raise TypeError(tr("RandomModel.tokenize: text must be a str, got {text_type}",
                               text_type=type(text).__name__))
        words = split_words(text)
        if not words:
            raise ValueError(tr("text must contain at least one word, got an empty text"))
        if len(words) > self.config.context_length:
            raise ValueError(tr("text has {n_words} words; this model accepts at most context_length={context_length}",
                                n_words=len(words), context_length=self.config.context_length))
        return words

    def token_embeddings(self, tokens: list[str]) -> Tensor:
        """``(T, d_model)``: each word's seeded vector."""
        return torch.stack([word_embedding(w, self.config.d_model, self.config.seed) for w in tokens])

    def positions(self, n: int) -> Tensor:
        """``(T, d_model)``: the sinusoidal encoding of positions 0..n-1."""
        return sinusoidal_table(n, self.config.d_model)

    def embed(self, tokens: list[str]) -> Tensor:
        """``(T, d_model)`` = word embedding + position."""
        return self.token_embeddings(tokens) + self.positions(len(tokens))

    def forward(self, x: Tensor, return_weights: bool = False):
        return self.attn(x, return_weights=return_weights)
