"""Reference modules built from torch.nn, holding the weights of an attnlab module: what the tests compare to."""

import contextlib

import torch

from attnlab.attention import MultiHeadAttention
from attnlab.layers import TransformerBlock


def torch_mha_like(mha: MultiHeadAttention) -> torch.nn.MultiheadAttention:
    """A torch.nn.MultiheadAttention holding the same weights (it packs q/k/v into one in_proj)."""
    ref = torch.nn.MultiheadAttention(mha.d_out, mha.num_heads, batch_first=True, bias=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_query.weight, mha.W_key.weight, mha.W_value.weight]))
        biases = [m.bias if m.bias is not None else torch.zeros(mha.d_out)
                  for m in (mha.W_query, mha.W_key, mha.W_value)]
        ref.in_proj_bias.copy_(torch.cat(biases))
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        ref.out_proj.bias.copy_(mha.out_proj.bias)
    return ref.eval()


def torch_block(ours: TransformerBlock, norm: str, activation) -> torch.nn.TransformerEncoderLayer:
    d = ours.ln1.d_model
    ref = torch.nn.TransformerEncoderLayer(d, ours.attn.num_heads, ours.ff.linear1.out_features, dropout=0.0,
                                           activation=activation, batch_first=True, norm_first=norm == "pre",
                                           layer_norm_eps=ours.ln1.eps)
    ref.self_attn = torch_mha_like(ours.attn)
    with torch.no_grad():
        ref.linear1.load_state_dict(ours.ff.linear1.state_dict())
        ref.linear2.load_state_dict(ours.ff.linear2.state_dict())
        ref.norm1.load_state_dict(ours.ln1.state_dict())
        ref.norm2.load_state_dict(ours.ln2.state_dict())
    return ref.eval()


def torch_decoder_layer(ours, activation="relu") -> torch.nn.TransformerDecoderLayer:
    """A torch.nn.TransformerDecoderLayer holding the weights of an attnlab DecoderBlock."""
    d = ours.ln1.d_model
    ref = torch.nn.TransformerDecoderLayer(d, ours.self_attn.num_heads, ours.ff.linear1.out_features, dropout=0.0,
                                           activation=activation, batch_first=True, norm_first=ours.norm == "pre",
                                           layer_norm_eps=ours.ln1.eps)
    ref.self_attn = torch_mha_like(ours.self_attn)
    ref.multihead_attn = torch_mha_like(ours.cross_attn)
    with torch.no_grad():
        for mine, theirs in ((ours.ff.linear1, ref.linear1), (ours.ff.linear2, ref.linear2), (ours.ln1, ref.norm1),
                             (ours.ln2, ref.norm2), (ours.ln3, ref.norm3)):
            theirs.load_state_dict(mine.state_dict())
    return ref.eval()


@contextlib.contextmanager
def scaled_by_hand(modules, head_mask: torch.Tensor, head_dim: int):
    """While open: each module's ``out_proj`` input has head h's columns ``h·head_dim .. (h+1)·head_dim`` multiplied
    by ``head_mask[l, h]`` (the reference: written here, not by the code under test)."""

    def hook_for(row):
        def hook(_module, args):
            (context,) = args
            context = context.clone()
            for h, value in enumerate(row.tolist()):
                context[..., h * head_dim:(h + 1) * head_dim] *= value
            return (context,)
        return hook

    handles = [m.out_proj.register_forward_pre_hook(hook_for(row)) for m, row in zip(modules, head_mask, strict=True)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
