"""From ``torch.nn.Transformer`` to attnlab's :class:`~attnlab.models.Transformer`: the configuration read off the
module, and its encoder and decoder stacks copied weight for weight.

torch packs each attention's query, key and value projections into one ``in_proj_weight (3·D, D)``; attnlab keeps
them apart (``W_query``, ``W_key``, ``W_value``, as the book names them), so the copy splits it in three.
``nn.Transformer`` always ends both stacks in a LayerNorm (``encoder.norm``, ``decoder.norm``), post-LN or not;
the converted model gets them too (``final_norm=True``).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.attention import MultiHeadAttention
from attnlab.i18n import tr
from attnlab.layers import DecoderBlock, TransformerBlock
from attnlab.models.transformer.config import TransformerConfig


class Stacks(Protocol):
    """What :func:`copy_torch_body` fills: a :class:`~attnlab.models.Transformer`'s two stacks and final norms."""

    @property
    def encoder_blocks(self) -> nn.ModuleList: ...
    @property
    def decoder_blocks(self) -> nn.ModuleList: ...
    @property
    def encoder_norm(self) -> nn.Module | None: ...
    @property
    def decoder_norm(self) -> nn.Module | None: ...


def _activation(layer: nn.Module) -> str:
    act = layer.activation
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    raise ValueError(tr("from_torch: the layers' activation must be relu or gelu, got {got!r}", got=act))


def _check_module(module: Any) -> None:
    if not isinstance(module, nn.Transformer):
        raise TypeError(tr("from_torch: module must be a torch.nn.Transformer, got {got}", got=type(module).__name__))
    if not isinstance(module.encoder, nn.TransformerEncoder) or not isinstance(module.decoder, nn.TransformerDecoder):
        raise TypeError(tr("from_torch: only nn.Transformer's own encoder and decoder stacks can be copied, got "
                           "{enc} and {dec}", enc=type(module.encoder).__name__, dec=type(module.decoder).__name__))
    if not module.batch_first:
        raise ValueError(tr("from_torch: module must be built with batch_first=True (attnlab's shapes are "
                            "(B, T, D)), got batch_first=False"))
    if (module.encoder.norm is None) != (module.decoder.norm is None):
        raise ValueError(tr("from_torch: the encoder and decoder must both end in a LayerNorm or both not"))


def config_from_torch(module: nn.Transformer, **overrides: Any) -> TransformerConfig:
    """The :class:`TransformerConfig` of ``module``'s stacks; the fields ``nn.Transformer`` does not have
    (``vocab_size``, ``context_length``, the special ids, ``backend``) come from ``overrides``."""
    _check_module(module)
    enc, dec = module.encoder.layers[0], module.decoder.layers[0]
    read = dict(
        d_model=enc.self_attn.embed_dim, num_heads=enc.self_attn.num_heads,
        num_encoder_layers=len(module.encoder.layers), num_decoder_layers=len(module.decoder.layers),
        d_ff=enc.linear1.out_features, dropout=enc.dropout.p, norm="pre" if enc.norm_first else "post",
        activation=_activation(dec), bias=enc.linear1.bias is not None, layer_norm_eps=enc.norm1.eps,
        final_norm=module.encoder.norm is not None,
    )
    clash = sorted(set(read) & set(overrides))
    if clash:
        raise TypeError(tr("from_torch: {fields} are read from the module, not given", fields=clash))
    return TransformerConfig(**read, **overrides)


@torch.no_grad()
def copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """torch's packed ``in_proj`` -> attnlab's ``W_query``, ``W_key``, ``W_value``; ``out_proj`` as it is."""
    for i, name in enumerate(("W_query", "W_key", "W_value")):
        d = ours.d_out
        getattr(ours, name).weight.copy_(theirs.in_proj_weight[i * d : (i + 1) * d])
        if theirs.in_proj_bias is not None:
            getattr(ours, name).bias.copy_(theirs.in_proj_bias[i * d : (i + 1) * d])
    ours.out_proj.load_state_dict(theirs.out_proj.state_dict())


@torch.no_grad()
def copy_torch_body(model: Stacks, module: nn.Transformer) -> None:
    """Copy ``module``'s encoder and decoder stacks (and their final norms) into ``model``, an attnlab
    :class:`~attnlab.models.Transformer` built from :func:`config_from_torch`."""
    for ours, theirs in zip(model.encoder_blocks, module.encoder.layers, strict=True):
        assert isinstance(ours, TransformerBlock)  # what Transformer builds its encoder of
        copy_attention(ours.attn, theirs.self_attn)
        pairs = [(ours.ln1, theirs.norm1), (ours.ln2, theirs.norm2), (ours.ff.linear1, theirs.linear1),
                 (ours.ff.linear2, theirs.linear2)]
        for a, b in pairs:
            a.load_state_dict(b.state_dict())
    for ours, theirs in zip(model.decoder_blocks, module.decoder.layers, strict=True):
        assert isinstance(ours, DecoderBlock)  # what Transformer builds its decoder of
        copy_attention(ours.self_attn, theirs.self_attn)
        copy_attention(ours.cross_attn, theirs.multihead_attn)
        pairs = [(ours.ln1, theirs.norm1), (ours.ln2, theirs.norm2), (ours.ln3, theirs.norm3),
                 (ours.ff.linear1, theirs.linear1), (ours.ff.linear2, theirs.linear2)]
        for a, b in pairs:
            a.load_state_dict(b.state_dict())
    if module.encoder.norm is not None:
        assert model.encoder_norm is not None and model.decoder_norm is not None  # has_final_norm read from module
        model.encoder_norm.load_state_dict(module.encoder.norm.state_dict())
        model.decoder_norm.load_state_dict(module.decoder.norm.state_dict())
