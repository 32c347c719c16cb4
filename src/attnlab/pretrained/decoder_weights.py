"""Where each tensor of a Hugging Face decoder checkpoint goes in attnlab's model, and in what shape it is stored.

Llama, Qwen2, Mistral, Qwen3 and Gemma 2/3 store ``nn.Linear`` weights ``(out, in)`` like ours, one tensor per
projection, under other names: a rename (Qwen3 and Gemma 3 add the q/k norms; Gemma 2/3 four norms per layer,
whose ``post_attention_layernorm`` is not Llama's). Phi-3 fuses q, k and v in one ``qkv_proj`` ``(q + 2·kv, d)``
and the gate and up projections in one ``gate_up_proj`` ``(2·d_ff, d)``: split along the rows.
GPT-2 stores its projections as ``Conv1D`` weights, ``(in, out)``, the transpose of ``nn.Linear``'s, and q, k and v
in one ``c_attn`` matrix ``(d, 3d)``: transpose, then split into thirds. The expected shapes come from attnlab's own
model (built on the meta device), so a checkpoint that does not fit the model its ``config.json`` describes is
caught tensor by tensor.
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
    "self_attn.q_norm": "attn.q_norm",
    "self_attn.k_norm": "attn.k_norm",
}
#: Gemma 2 and 3: a norm after each sublayer, so the one after the attention is not the one before the MLP
_GEMMA_NORMS = {"post_attention_layernorm": "post_attn_norm", "pre_feedforward_layernorm": "norm2",
                "post_feedforward_layernorm": "post_ff_norm"}


def _as_is(ours: str):
    return lambda t: {ours: t}


def _transposed(ours: str):
    return lambda t: {ours: t.t().contiguous()}


def llama_layout(shapes: dict[str, torch.Size], num_layers: int, tied: bool,
                 sandwich: bool = False) -> dict[str, Expected]:
    """Llama/Qwen2/Mistral/Qwen3 names -> ours (Gemma's with ``sandwich``). ``shapes``: our model's state dict
    shapes."""
    names = {"model.embed_tokens.weight": "tok_emb.weight", "model.norm.weight": "norm_f.weight",
             "lm_head.weight": "head.weight"}
    layer = {**_LLAMA_LAYER, **_GEMMA_NORMS} if sandwich else _LLAMA_LAYER
    for i in range(num_layers):
        for theirs, ours in layer.items():
            for kind in ("weight", "bias"):
                names[f"model.layers.{i}.{theirs}.{kind}"] = f"blocks.{i}.{ours}.{kind}"
    return {theirs: Expected(tuple(shapes[ours]), _as_is(ours), optional=tied and ours == "head.weight")
            for theirs, ours in names.items() if ours in shapes}


def _split_rows(parts: dict[str, int]):
    """A fused ``(Σ rows, in)`` weight -> one tensor per part, in order: ``parts`` our name -> its rows."""
    def convert(t: Tensor) -> dict[str, Tensor]:
        return {ours: x.contiguous() for ours, x in zip(parts, t.split(list(parts.values()), dim=0), strict=True)}
    return convert


def phi3_layout(shapes: dict[str, torch.Size], num_layers: int, tied: bool) -> dict[str, Expected]:
    """Phi-3's names -> ours: Llama's, with ``qkv_proj`` and ``gate_up_proj`` split."""
    layout = llama_layout(shapes, num_layers, tied)
    for i in range(num_layers):
        theirs, b = f"model.layers.{i}.", f"blocks.{i}."
        qkv = {f"{b}attn.W_{p}.weight": shapes[f"{b}attn.W_{p}.weight"][0] for p in ("query", "key", "value")}
        gate_up = {f"{b}ff.{p}.weight": shapes[f"{b}ff.{p}.weight"][0] for p in ("gate_proj", "up_proj")}
        d = shapes[f"{b}attn.W_query.weight"][1]
        for name in ("q_proj", "k_proj", "v_proj"):
            layout.pop(f"{theirs}self_attn.{name}.weight")
        for name in ("gate_proj", "up_proj"):
            layout.pop(f"{theirs}mlp.{name}.weight")
        layout[f"{theirs}self_attn.qkv_proj.weight"] = Expected((sum(qkv.values()), d), _split_rows(qkv))
        layout[f"{theirs}mlp.gate_up_proj.weight"] = Expected((sum(gate_up.values()), d), _split_rows(gate_up))
    return layout


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
