"""A BERT-style Transformer encoder.

    input_ids (B, T) -> token + position + token-type embeddings -> LayerNorm
                     -> N post-LN blocks (bidirectional attention, padding masked) -> (B, T, D)

Every token sees every real token, before and after it; padding positions are masked as keys,
so the output at a real token does not depend on how much padding the batch has.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.layers import LayerNorm, LearnedPositionalEmbedding, TransformerBlock
from attnlab.models.config import EncoderConfig
from attnlab.models.initialisation import init_weights
from attnlab.models.inputs import check_token_ids
from attnlab.models.outputs import EncoderOutput


class EncoderEmbeddings(nn.Module):
    """``input_ids (B, T)`` (+ ``token_type_ids``) -> LayerNorm(token + position + token type) ``(B, T, D)``."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        c = config
        self.word_embeddings = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_token_id)
        self.position_embeddings = LearnedPositionalEmbedding(c.max_position, c.d_model)
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
        >>> enc = TransformerEncoder(EncoderConfig.from_preset("minilm-l6", n_layers=1))
        >>> out = enc(torch.tensor([[101, 7592, 102, 0]]), attention_mask=torch.tensor([[1, 1, 1, 0]]))
        >>> out.last_hidden_state.shape
        torch.Size([1, 4, 384])
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        if not isinstance(config, EncoderConfig):
            raise TypeError(f"TransformerEncoder: config must be an EncoderConfig, got {type(config).__name__}")
        self.config = c = config
        self.embeddings = EncoderEmbeddings(c)
        self.blocks = nn.ModuleList(
            TransformerBlock(c.d_model, c.n_heads, c.d_ff, dropout=c.dropout, norm="post", causal=False,
                             activation=c.activation, qkv_bias=True, eps=c.layer_norm_eps, backend=c.backend)
            for _ in range(c.n_layers)
        )
        self.apply(init_weights)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _check_inputs(self, input_ids: Tensor, attention_mask: Tensor | None, token_type_ids: Tensor | None):
        owner, c = type(self).__name__, self.config
        check_token_ids(input_ids, c.vocab_size, owner)
        if input_ids.shape[1] > c.max_position:
            raise ValueError(
                f"{owner}: {input_ids.shape[1]} tokens exceed the model's max_position={c.max_position}; "
                f"truncate the input (e.g. tokenize(..., truncation=True))"
            )
        for name, t in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
            if t is not None and tuple(t.shape) != tuple(input_ids.shape):
                raise ValueError(f"{owner}: {name} must have the shape of input_ids {tuple(input_ids.shape)}, "
                                 f"got {tuple(t.shape)}")
        if token_type_ids is not None:
            check_token_ids(token_type_ids, max(c.type_vocab_size, 1), f"{owner} (token_type_ids)")

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None,
                output_attentions: bool = False, output_hidden_states: bool = False) -> EncoderOutput:
        """Encode a padded batch.

        Args:
            input_ids: ``(B, T)`` token ids, ``T <= max_position``.
            attention_mask: ``(B, T)``, 1 for real tokens, 0 for padding (None: all real).
            token_type_ids: ``(B, T)`` segment ids (None: all 0).
            output_attentions: also return every layer's weights ``(B, H, T, T)`` (math backend).
            output_hidden_states: also return the embeddings and every block's output.
        """
        self._check_inputs(input_ids, attention_mask, token_type_ids)
        # nothing to mask: let the fused kernel run unmasked
        all_real = attention_mask is not None and bool(attention_mask.all())
        attention_mask_used = None if all_real else attention_mask
        x = self.embeddings(input_ids, token_type_ids)
        hidden, attentions = [x], []
        for block in self.blocks:
            x = block(x, attention_mask_used, return_weights=output_attentions)
            if output_attentions:
                x, w = x
                attentions.append(w)
            hidden.append(x)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return EncoderOutput(
            last_hidden_state=x,
            hidden_states=tuple(hidden) if output_hidden_states else None,
            attentions=tuple(attentions) if output_attentions else None,
            attention_mask=attention_mask,
        )
