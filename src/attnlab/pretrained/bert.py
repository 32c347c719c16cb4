"""A pretrained BERT-family encoder with its tokenizer: text in, vectors (and attention) out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from attnlab.fast import accelerated
from attnlab.i18n import tr
from attnlab.models import EncoderConfig, EncoderOutput, TransformerEncoder, sentence_embedding


@dataclass
class TokenBatch:
    """A padded batch of tokenized texts; tensors are ``(B, T)`` with ``T`` the longest text."""

    input_ids: Tensor
    attention_mask: Tensor
    token_type_ids: Tensor
    tokens: list[list[str]]


def _check_texts(texts: Any) -> list[str]:
    if isinstance(texts, str):
        return [texts]
    if not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
        raise TypeError(tr("texts must be a str or a sequence of str, got {texts_type}",
                           texts_type=type(texts).__name__))
    return list(texts)


def pad(encodings: list, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """Right-pad token ids, masks and type ids to the longest: three ``(B, T)`` int64 tensors."""
    t = max(len(e.ids) for e in encodings)
    ids = torch.full((len(encodings), t), pad_id, dtype=torch.long)
    mask = torch.zeros(len(encodings), t, dtype=torch.long)
    types = torch.zeros(len(encodings), t, dtype=torch.long)
    for i, e in enumerate(encodings):
        n = len(e.ids)
        ids[i, :n] = torch.tensor(e.ids, dtype=torch.long)
        mask[i, :n] = 1
        types[i, :n] = torch.tensor(e.type_ids, dtype=torch.long)
    return ids, mask, types


class PretrainedBert(nn.Module):
    """``encoder`` (our :class:`TransformerEncoder`, weights loaded) and ``tokenizer`` (``tokenizers``).

    Use :meth:`tokenize` + :meth:`forward` to look inside (attention weights, hidden states), and
    :meth:`encode` to embed many texts fast.
    """

    def __init__(self, encoder: TransformerEncoder, tokenizer: Any, name: str = "") -> None:
        super().__init__()
        self.encoder, self.tokenizer, self.name = encoder, tokenizer, name

    @property
    def config(self) -> EncoderConfig:
        return self.encoder.config

    def _encodings(self, texts: list[str], truncation: bool) -> list:
        context_length = self.config.context_length
        if truncation:
            self.tokenizer.enable_truncation(context_length)
        try:
            encodings = self.tokenizer.encode_batch(texts)
        finally:
            self.tokenizer.no_truncation()
        for i, e in enumerate(encodings):
            if len(e.ids) > context_length:
                raise ValueError(tr("text {i} has {n_ids} tokens, more than the model's {context_length} positions; "
                                    "pass truncation=True to keep the first {context_length}", i=i, n_ids=len(e.ids),
                                    context_length=context_length))
        return encodings

    def tokenize(self, texts: str | Sequence[str], truncation: bool = False) -> TokenBatch:
        """Tokenize and right-pad to the longest text. Too long a text raises ``ValueError`` unless
        ``truncation=True`` (then it keeps its first ``context_length`` tokens, [SEP] last)."""
        texts = _check_texts(texts)
        if not texts:
            raise ValueError(tr("texts is empty: nothing to tokenize"))
        encodings = self._encodings(texts, truncation)
        ids, mask, types = pad(encodings, self.config.pad_id)
        return TokenBatch(ids, mask, types, [list(e.tokens) for e in encodings])

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None,
                return_weights: bool = False, return_hidden_states: bool = False,
                head_mask: Tensor | None = None) -> EncoderOutput:
        """The encoder's forward: see :meth:`TransformerEncoder.forward`."""
        return self.encoder(input_ids, attention_mask, token_type_ids, return_weights=return_weights,
                            return_hidden_states=return_hidden_states, head_mask=head_mask)

    @torch.inference_mode()
    def encode(self, texts: str | Sequence[str], batch_size: int = 32, truncation: bool = False, *,
               accelerate: bool = True) -> Tensor:
        """Sentence embeddings ``(N, D)``, L2-normalised mean pooling, in the order of ``texts``; by the encoder's
        fast twin (:func:`attnlab.fast.accelerated`: oneDNN's packed linears, the same numbers) unless
        ``accelerate=False``.

        Texts are sorted by length and batched with their neighbours, so a batch is padded only to
        the longest of similar lengths: almost no compute goes to padding. The result does not depend
        on the batching (padding is masked).
        """
        texts = _check_texts(texts)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(tr("batch_size must be a positive int, got {batch_size!r}", batch_size=batch_size))
        d = self.config.d_model
        if not texts:
            return torch.empty(0, d)
        was_training = self.training
        self.eval()
        encoder = accelerated(self.encoder) if accelerate else self.encoder
        try:
            encodings = self._encodings(texts, truncation)
            order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids), reverse=True)
            out = torch.empty(len(texts), d)
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                ids, mask, types = pad([encodings[i] for i in chunk], self.config.pad_id)
                hidden = encoder(ids, mask, types).last_hidden_state
                out[chunk] = sentence_embedding(hidden, mask)
        finally:
            self.train(was_training)
        return out
