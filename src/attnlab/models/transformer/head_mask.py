"""The head mask of an encoder-decoder: one mask per attention, as a decoder has one for its self-attention.

A translation model has three attentions, and a head of one is not a head of another: the encoder's
self-attention (``num_encoder_layers`` layers), the decoder's masked self-attention and its cross-attention
(``num_decoder_layers`` each). :class:`Seq2SeqHeadMask` holds a ``(layers, num_heads)`` mask for each, in the
convention of every other model's ``head_mask``: head h of layer l has its output multiplied by ``mask[l, h]``
before ``out_proj`` mixes the heads (0 removes it, 1 keeps it; differentiable). A mask left out (None) keeps every
head of that attention.

Example:
    >>> cross = torch.ones(2, 4)
    >>> cross[1, 0] = 0.0                                    # decoder layer 1's cross-attention head 0 removed
    >>> model(src, tgt, head_mask=Seq2SeqHeadMask(cross=cross))   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from torch import Tensor

from attnlab.attention.checks import check_head_mask
from attnlab.i18n import tr
from attnlab.models.transformer.config import TransformerConfig


@dataclass(frozen=True)
class Seq2SeqHeadMask:
    """One head mask per attention of :class:`~attnlab.models.Transformer` (see the module).

    Attributes:
        encoder: ``(num_encoder_layers, num_heads)``: the encoder's self-attention.
        decoder: ``(num_decoder_layers, num_heads)``: the decoder's masked self-attention.
        cross: ``(num_decoder_layers, num_heads)``: the cross-attention (target queries, source keys).
    """

    encoder: Tensor | None = None
    decoder: Tensor | None = None
    cross: Tensor | None = None


def layer_mask(head_mask: Seq2SeqHeadMask | None, name: str, index: int) -> Tensor | None:
    """Layer ``index``'s ``(num_heads,)`` row of ``head_mask``'s mask ``name`` (None: every head of it on)."""
    mask = None if head_mask is None else getattr(head_mask, name)
    return None if mask is None else mask[index]


def check_seq2seq_head_mask(head_mask: object, config: TransformerConfig, owner: str) -> Seq2SeqHeadMask | None:
    """``head_mask`` checked against ``config``'s layers and heads: a :class:`Seq2SeqHeadMask` whose every mask
    has its attention's shape (shapes and dtypes only: nothing read from the device)."""
    if head_mask is None:
        return None
    if not isinstance(head_mask, Seq2SeqHeadMask):
        raise TypeError(tr("{owner}: head_mask must be a Seq2SeqHeadMask(encoder=..., decoder=..., cross=...), one "
                           "(layers, num_heads) mask per attention, got {got}", owner=owner,
                           got=type(head_mask).__name__))
    layers = {"encoder": ("num_encoder_layers", config.num_encoder_layers),
              "decoder": ("num_decoder_layers", config.num_decoder_layers),
              "cross": ("num_decoder_layers", config.num_decoder_layers)}
    for f in fields(head_mask):
        mask, (names, count) = getattr(head_mask, f.name), layers[f.name]
        shape = (count, config.num_heads)
        if isinstance(mask, Tensor) and tuple(mask.shape) != shape:
            raise ValueError(tr("{owner}: head_mask.{name} must have shape ({names}, num_heads) = {shape}, got "
                                "{got}", owner=owner, name=f.name, names=names, shape=shape, got=tuple(mask.shape)))
        if mask is not None:
            check_head_mask(mask, shape, f"{owner}: head_mask.{f.name}")  # a float tensor (its gradient may be asked)
    return head_mask
