"""Where each tensor of a Hugging Face decoder checkpoint goes in attnlab's model, and in what shape it is stored.

Llama, Qwen2 and Mistral store ``nn.Linear`` weights ``(out, in)`` like ours, one tensor per projection, under
other names: a rename. GPT-2 stores its projections as ``Conv1D`` weights, ``(in, out)``, the transpose of
``nn.Linear``'s, and q, k and v in one ``c_attn`` matrix ``(d, 3d)``: transpose, then split into thirds.
The expected shapes come from attnlab's own model (built on the meta device), so a checkpoint that does not fit
the model its ``config.json`` describes is caught tensor by tensor.
"""

from __future__ import annotations

import re

import torch
from torch import Tensor

from attnlab.pretrained.checkpoint_files import Expected

#: stored, but not weights: GPT-2's causal-mask buffers, old Llama checkpoints' RoPE frequencies
IGNORED = re.compile(r"(\.attn\.(masked_)?bias|\.rotary_emb\.inv_freq)$")

_LLAMA_LAYER = {
    "self_attn.q_proj": "attn.W_query",
    "self_attn.k_proj": "attn.W_key",
    "self_attn.v_proj": "attn.W_value",
    "self_attn.o_proj": "attn.out_proj",
    "mlp.gate_proj": "ff.gate_proj",
    "mlp.up_proj": "ff.up_proj",
    "mlp.down_proj": "ff.down_proj",
    "input_layernorm": "norm1",
    "post_attention_layernorm": "norm2",
}


def _as_is(ours: str):
    return lambda t: {ours: t}


def _transposed(ours: str):
    return lambda t: {ours: t.t().contiguous()}


def llama_layout(shapes: dict[str, torch.Size], num_layers: int, tied: bool) -> dict[str, Expected]:
    """Llama/Qwen2/Mistral names -> ours. ``shapes``: our model's state dict shapes."""
    names = {"model.embed_tokens.weight": "tok_emb.weight", "model.norm.weight": "norm_f.weight",
             "lm_head.weight": "head.weight"}
    for i in range(num_layers):
        for theirs, ours in _LLAMA_LAYER.items():
            for kind in ("weight", "bias"):
                names[f"model.layers.{i}.{theirs}.{kind}"] = f"blocks.{i}.{ours}.{kind}"
    return {theirs: Expected(tuple(shapes[ours]), _as_is(ours), optional=tied and ours == "head.weight")
            for theirs, ours in names.items() if ours in shapes}


def _split_qkv(i: int):
    def convert(t: Tensor) -> dict[str, Tensor]:
        q, k, v = t.t().chunk(3, dim=0) if t.dim() == 2 else t.chunk(3)
        return {f"blocks.{i}.attn.W_{part}.{'weight' if t.dim() == 2 else 'bias'}": x.contiguous()
                for part, x in zip(("query", "key", "value"), (q, k, v), strict=True)}
    return convert


def gpt2_layout(shapes: dict[str, torch.Size], num_layers: int, tied: bool, prefix: str) -> dict[str, Expected]:
    """GPT-2 names (``prefix`` "transformer." in ``GPT2LMHeadModel``, "" in a bare ``GPT2Model``) -> ours."""
    d, vocab = shapes["tok_emb.weight"][1], shapes["tok_emb.weight"][0]
    layout = {
        f"{prefix}wte.weight": Expected((vocab, d), _as_is("tok_emb.weight")),
        f"{prefix}wpe.weight": Expected(tuple(shapes["pos_emb.weight"]), _as_is("pos_emb.weight")),
        f"{prefix}ln_f.weight": Expected((d,), _as_is("ln_f.weight")),
        f"{prefix}ln_f.bias": Expected((d,), _as_is("ln_f.bias")),
        "lm_head.weight": Expected((vocab, d), _as_is("head.weight"), optional=tied),
    }
    for i in range(num_layers):
        h, b = f"{prefix}h.{i}.", f"blocks.{i}."
        d_ff = shapes[f"{b}ff.linear1.weight"][0]
        layout |= {
            f"{h}attn.c_attn.weight": Expected((d, 3 * d), _split_qkv(i)),
            f"{h}attn.c_attn.bias": Expected((3 * d,), _split_qkv(i)),
            f"{h}attn.c_proj.weight": Expected((d, d), _transposed(f"{b}attn.out_proj.weight")),
            f"{h}attn.c_proj.bias": Expected((d,), _as_is(f"{b}attn.out_proj.bias")),
            f"{h}mlp.c_fc.weight": Expected((d, d_ff), _transposed(f"{b}ff.linear1.weight")),
            f"{h}mlp.c_fc.bias": Expected((d_ff,), _as_is(f"{b}ff.linear1.bias")),
            f"{h}mlp.c_proj.weight": Expected((d_ff, d), _transposed(f"{b}ff.linear2.weight")),
            f"{h}mlp.c_proj.bias": Expected((d,), _as_is(f"{b}ff.linear2.bias")),
        }
        for norm, ours in (("ln_1", "ln1"), ("ln_2", "ln2")):
            for kind in ("weight", "bias"):
                layout[f"{h}{norm}.{kind}"] = Expected((d,), _as_is(f"{b}{ours}.{kind}"))
    return layout
