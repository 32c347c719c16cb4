"""DiffLlama (``diffllama``): ``config.json`` -> a :class:`~attnlab.models.modern.diffllama.DiffLlamaConfig`, and
its tensors -> attnlab's names.

Fields read, as transformers 5 writes them: the Llama-like sizes (``head_dim`` too), ``rms_norm_eps`` (also the ε of
each pair's norm), ``rope_parameters`` (or the older top-level ``rope_theta`` / ``rope_scaling``: any scaling
attnlab's RoPE has), ``tie_word_embeddings``, ``attention_bias`` (on q, k, v and o, as transformers puts it),
``lambda_std_dev`` (the λ vectors' starting spread, replaced by the checkpoint's). Refused by name: another
``hidden_act``, an ``attention_dropout`` above 0 (transformers refuses it too), odd head counts, and any field neither
read nor known to change nothing.

Tensors: Llama's names, and per layer the four λ vectors ``self_attn.lambda_q1``, ``lambda_k1``, ``lambda_q2``,
``lambda_k2`` ``(head_dim,)``. The pairs' norm has no weight (transformers' ``groupnorm`` has none), so nothing of
it is stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from attnlab.i18n import tr
from attnlab.models.modern.diffllama import DiffLlamaConfig
from attnlab.pretrained.checkpoint_files import Expected
from attnlab.pretrained.config_fields import _LLAMA_LIKE, refuse_unknown_fields
from attnlab.pretrained.decoder_configs import _build, _refuse, _shapes, rope_of
from attnlab.pretrained.decoder_weights import _as_is, llama_layout

#: the checkpoints' ``model_type``, the key of this loader in causal_lm's table
FAMILY = "diffllama"
#: the fields the reader looks at
READ = _LLAMA_LIKE | {"attention_bias", "lambda_std_dev"}
LAMBDAS = ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")


def read_config(raw: dict[str, Any], path: Path) -> DiffLlamaConfig:
    """A DiffLlama ``config.json`` (``raw``, read from ``path``) -> its config."""
    refuse_unknown_fields(FAMILY, raw, path, READ)
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise _refuse(path, "hidden_act", act, tr("the SwiGLU feed-forward gates with SiLU"))
    dropout = raw.get("attention_dropout") or 0.0
    if dropout:
        raise _refuse(path, "attention_dropout", dropout, tr("differential attention has no dropout (the paper "
                                                             "defines none for a difference of two maps)"))
    base, scaling = rope_of(raw, path)
    bias = bool(raw.get("attention_bias", False))
    return _build(DiffLlamaConfig, path, **_shapes(raw, path), qkv_bias=bias, out_bias=bias, rope_base=base,
                  rope_scaling=scaling, tie_weights=bool(raw.get("tie_word_embeddings", False)),
                  lambda_std=raw.get("lambda_std_dev", 0.1))


def layout(shapes: dict[str, torch.Size], config: DiffLlamaConfig) -> dict[str, Expected]:
    """DiffLlama's names -> ours: Llama's, and each layer's four λ vectors."""
    names = llama_layout(shapes, config.num_layers, config.tie_weights)
    for i in range(config.num_layers):
        for name in LAMBDAS:
            ours = f"blocks.{i}.attn.{name}"
            names[f"model.layers.{i}.self_attn.{name}"] = Expected(tuple(shapes[ours]), _as_is(ours))
    return names
