"""A BERT-style Transformer encoder.

    input_ids (B, T) -> token + position + token-type embeddings -> LayerNorm
                     -> N post-LN blocks (bidirectional attention, padding masked) -> (B, T, D)

Every token sees every real token, before and after it; padding positions are masked as keys,
so the output at a real token does not depend on how much padding the batch has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.checks import check_head_mask
from attnlab.functional.masks import key_mask
from attnlab.i18n import tr
from attnlab.layers import LayerNorm, LearnedPositionalEmbedding, TransformerBlock
from attnlab.layers.initialisation import init_weights
from attnlab.models.checks import (
    check_attention_mask_dtype,
    check_ids_tensor,
    check_same_shape,
    id_range_error,
    mask_values_error,
    read_facts,
)
from attnlab.models.config import Presets, block_spec, common_checks


@dataclass
class EncoderConfig(Presets):
    """A BERT-style encoder (see :class:`attnlab.models.TransformerEncoder`).

    Args:
        vocab_size: number of token ids.
        context_length: the most positions the model has (BERT: 512).
        d_model: width of every token vector.
        num_layers: number of post-LN blocks.
        num_heads: attention heads per block; must divide ``d_model``.
        d_ff: feed-forward hidden width; None means ``4 · d_model``.
        type_vocab_size: number of token types (segments A/B in BERT); 0 for none.
        dropout: on embeddings, attention weights and sublayer outputs, training only.
        activation: feed-forward non-linearity (BERT: exact ``"gelu"``).
        layer_norm_eps: LayerNorm epsilon (BERT: 1e-12).
        pad_id: the id used for padding (Hugging Face's ``pad_token_id``).
        backend: attention backend for the blocks.
    """

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int | None = None
    type_vocab_size: int = 2
    dropout: float = 0.0
    activation: str = "gelu"
    layer_norm_eps: float = 1e-12
    pad_id: int = 0
    backend: str = "auto"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "bert-base": dict(vocab_size=30522, context_length=512, d_model=768, num_layers=12, num_heads=12, d_ff=3072),
        # the encoder of the usual tutorials: BERT-base's dimensions with a 30,000-token vocabulary
        "tutorial-encoder": dict(vocab_size=30000, context_length=512, d_model=768, num_layers=12, num_heads=12,
                                 d_ff=3072),
        "minilm-l6": dict(vocab_size=30522, context_length=512, d_model=384, num_layers=6, num_heads=12, d_ff=1536),
    }

    def __post_init__(self) -> None:
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model if isinstance(self.d_model, int) else self.d_model
        common_checks(self, type(self).__name__)
        if isinstance(self.type_vocab_size, bool) or not isinstance(self.type_vocab_size, int) \
                or self.type_vocab_size < 0:
            raise ValueError(tr("EncoderConfig: type_vocab_size must be an int >= 0, got {type_vocab_size!r}",
                                type_vocab_size=self.type_vocab_size))
        if not isinstance(self.pad_id, int) or not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(
                tr("EncoderConfig: pad_id must be in [0, vocab_size={vocab_size}), got {pad_id!r}",
                   vocab_size=self.vocab_size, pad_id=self.pad_id)
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


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


class EncoderEmbeddings(nn.Module):
    """``input_ids (B, T)`` (+ ``token_type_ids``) -> LayerNorm(token + position + token type) ``(B, T, D)``."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        c = config
        self.word_embeddings = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.position_embeddings = LearnedPositionalEmbedding(c.d_model, c.context_length)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.d_model) if c.type_vocab_size else None
        self.ln = LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        x = self.position_embeddings(self.word_embeddings(input_ids))
        if self.token_type_embeddings is not None:
            # no token types given: all type 0, one row broadcast instead of a (B, T) lookup
            x = x + (self.token_type_embeddings.weight[0] if token_type_ids is None
                     else self.token_type_embeddings(token_type_ids))
        return self.drop(self.ln(x))


class TransformerEncoder(nn.Module):
    """BERT's encoder (without BERT's pooler): ``input_ids (B, T)`` -> :class:`EncoderOutput`.

    Example:
        >>> enc = TransformerEncoder(EncoderConfig.from_preset("minilm-l6", num_layers=1))
        >>> out = enc(torch.tensor([[101, 7592, 102, 0]]), attention_mask=torch.tensor([[1, 1, 1, 0]]))
        >>> out.last_hidden_state.shape
        torch.Size([1, 4, 384])
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        if not isinstance(config, EncoderConfig):
            raise TypeError(tr("TransformerEncoder: config must be an EncoderConfig, got {config_type}",
                               config_type=type(config).__name__))
        self.config = c = config
        self.embeddings = EncoderEmbeddings(c)
        spec = block_spec(c, norm="post", eps=c.layer_norm_eps)  # bidirectional, biases everywhere (BERT's)
        self.blocks = nn.ModuleList(TransformerBlock(spec) for _ in range(c.num_layers))
        self.apply(init_weights)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _check_inputs(self, input_ids: Tensor, attention_mask: Tensor | None,
                      token_type_ids: Tensor | None) -> Tensor | None:
        """Check everything once (one host sync); return the key mask ``(B, 1, 1, T)``, or None if all is real."""
        owner, c = type(self).__name__, self.config
        check_ids_tensor(input_ids, owner)
        if input_ids.shape[1] > c.context_length:
            raise ValueError(
                tr("{owner}: {shape} tokens exceed the model's context_length={context_length}; truncate the input "
                   "(e.g. tokenize(..., truncation=True))", owner=owner, shape=input_ids.shape[1],
                   context_length=c.context_length)
            )
        check_same_shape(owner, "attention_mask", attention_mask, input_ids.shape)
        check_same_shape(owner, "token_type_ids", token_type_ids, input_ids.shape)
        check_attention_mask_dtype(owner, attention_mask)
        if token_type_ids is not None:
            check_ids_tensor(token_type_ids, owner, "token_type_ids")
        facts = [input_ids.min(), input_ids.max()]
        if attention_mask is not None:
            facts += [((attention_mask != 0) & (attention_mask != 1)).any(), attention_mask.all()]
        if token_type_ids is not None:
            facts += [token_type_ids.min(), token_type_ids.max()]
        values = read_facts(*facts)
        errors = [id_range_error(owner, "token ids", values[0], values[1], c.vocab_size)]
        if attention_mask is not None and values[2]:
            errors.append(mask_values_error(owner, attention_mask))
        if token_type_ids is not None:
            errors.append(id_range_error(f"{owner} (token_type_ids)", "token ids", values[-2], values[-1],
                                         max(c.type_vocab_size, 1)))
        for error in errors:
            if error is not None:
                raise error
        if attention_mask is None or values[3]:  # nothing to mask: the fused kernel runs unmasked
            return None
        return key_mask(attention_mask)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None,
                return_weights: bool = False, return_hidden_states: bool = False,
                head_mask: Tensor | None = None) -> EncoderOutput:
        """Encode a padded batch.

        Args:
            input_ids: ``(B, T)`` token ids, ``T <= context_length``.
            attention_mask: ``(B, T)``, 1 for real tokens, 0 for padding (None: all real).
            token_type_ids: ``(B, T)`` segment ids (None: all 0).
            return_weights: also return every layer's weights ``(B, H, T, T)`` (math backend).
            return_hidden_states: also return the embeddings and every block's output.
            head_mask: ``(num_layers, num_heads)``: each head's output times its entry before ``out_proj``.
        """
        mask = self._check_inputs(input_ids, attention_mask, token_type_ids)  # the blocks trust it
        if head_mask is not None:
            check_head_mask(head_mask, (self.config.num_layers, self.config.num_heads), type(self).__name__)
        x = self.embeddings(input_ids, token_type_ids)
        hidden, attentions = [x], []
        for i, block in enumerate(self.blocks):
            x = block(x, attn_mask=mask, return_weights=return_weights,
                      head_mask=None if head_mask is None else head_mask[i])
            if return_weights:
                x, w = x
                attentions.append(w)
            hidden.append(x)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return EncoderOutput(
            last_hidden_state=x,
            hidden_states=tuple(hidden) if return_hidden_states else None,
            attentions=tuple(attentions) if return_weights else None,
            attention_mask=attention_mask,
        )
