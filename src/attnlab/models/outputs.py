"""What the models return when asked for more than their main tensor."""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor


def mean_pooling(hidden: Tensor, attention_mask: Tensor | None) -> Tensor:
    """Mean of ``hidden (B, T, D)`` over the real tokens (``attention_mask (B, T)`` 1 = real) -> ``(B, D)``.

    A row with no real token gets zeros (its mean is undefined), not NaN.
    """
    if attention_mask is None:
        return hidden.mean(dim=1)
    m = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)


def sentence_embedding(hidden: Tensor, attention_mask: Tensor | None) -> Tensor:
    """Sentence-Transformers' recipe: mean pooling over real tokens, then L2-normalised: ``(B, D)``."""
    return F.normalize(mean_pooling(hidden, attention_mask), p=2, dim=-1)


@dataclass
class CausalLMOutput:
    """What a language model's forward returns (Hugging Face's field names).

    Attributes:
        logits: ``(B, T, vocab_size)``: the scores of the next token at every position.
        loss: the mean next-token cross-entropy, when ``targets`` were given.
        attentions: with ``return_weights``: one ``(B, H, T, T)`` weight tensor per layer
            (keys ``(B, H, T, L)`` with a cache of ``L`` positions).
    """

    logits: Tensor
    loss: Tensor | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class EncoderOutput:
    """``TransformerEncoder.forward`` (Hugging Face's field names).

    Attributes:
        last_hidden_state: ``(B, T, D)``; rows at padding positions are computed but meaningless.
        hidden_states: with ``return_hidden_states``: ``num_layers + 1`` tensors ``(B, T, D)``, the
            embeddings first, then each block's output.
        attentions: with ``return_weights``: one ``(B, H, T, T)`` per layer.
        attention_mask: the ``(B, T)`` mask used (1 = real token), kept for pooling.
    """

    last_hidden_state: Tensor
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None
    attention_mask: Tensor | None = None

    def sentence_embedding(self) -> Tensor:
        """Mean over real tokens, L2-normalised: ``(B, D)``."""
        return sentence_embedding(self.last_hidden_state, self.attention_mask)


@dataclass
class Seq2SeqOutput:
    """What an encoder-decoder's forward returns (:class:`attnlab.models.Transformer`).

    Attributes:
        logits: ``(B, T, vocab_size)``: the scores of the next target token at every target position.
        loss: the mean (label-smoothed) cross-entropy over the non-padding targets, when ``targets`` were given.
        encoder_attentions: with ``return_weights``: one ``(B, H, S, S)`` per encoder layer.
        decoder_attentions: with ``return_weights``: one ``(B, H, T, T)`` per decoder layer (masked self-attention;
            ``(B, H, T, L)`` with a cache of ``L`` positions).
        cross_attentions: with ``return_weights``: one ``(B, H, T, S)`` per decoder layer: target tokens (rows)
            attending to source tokens (columns), the alignment.
    """

    logits: Tensor
    loss: Tensor | None = None
    encoder_attentions: tuple[Tensor, ...] | None = None
    decoder_attentions: tuple[Tensor, ...] | None = None
    cross_attentions: tuple[Tensor, ...] | None = None
