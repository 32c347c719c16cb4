"""Gemma 4, text (``gemma4_text``, transformers' ``Gemma4ForCausalLM``): ``config.json`` -> a
:class:`~attnlab.models.modern.gemma4.Gemma4Config`, and its tensor names -> ours.

Fields read, as transformers 5 writes them (a field absent takes transformers' ``Gemma4TextConfig`` default): the
Llama-like sizes (``head_dim``, ``num_key_value_heads``: the sliding layers'), ``rms_norm_eps``,
``hidden_activation`` (GELU's tanh form only), ``attention_bias`` (q, k, v and o), ``sliding_window``,
``layer_types`` (the last layer global, as transformers forces it), ``rope_parameters`` (one dict per layer type:
the sliding layers' plain RoPE, the global layers' ``proportional`` RoPE with its ``partial_rotary_factor`` and a
linear ``factor``), the global layers' head size and key/value heads (``per_layer_config``, or the older
``global_head_dim`` and ``num_global_key_value_heads``, the latter only with ``attention_k_eq_v``, as transformers
reads them), ``attention_k_eq_v``, ``num_kv_shared_layers``, ``use_double_wide_mlp``,
``hidden_size_per_layer_input``, ``vocab_size_per_layer_input`` (equal to ``vocab_size``), ``enable_moe_block``
(false), ``final_logit_softcapping``, ``use_bidirectional_attention`` (null), ``tie_word_embeddings``. Refused by
name: each of those outside what it can be here, the experts' fields, and any field neither read nor known to
change nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from attnlab.i18n import tr
from attnlab.models.modern.gemma4 import Gemma4Config
from attnlab.pretrained.checkpoint_files import Expected
from attnlab.pretrained.config_fields import _LLAMA_LIKE, refuse_unknown_fields
from attnlab.pretrained.decoder_configs import _build, _refuse, _shapes, _within_context
from attnlab.pretrained.decoder_weights import _as_is, llama_layout

#: the checkpoints' ``model_type``, the key of this loader in causal_lm's table
FAMILY = "gemma4_text"
#: the fields the reader looks at
READ = _LLAMA_LIKE | {
    "hidden_activation", "attention_bias", "layer_types", "final_logit_softcapping", "use_bidirectional_attention",
    "vocab_size_per_layer_input", "hidden_size_per_layer_input", "attention_k_eq_v", "num_kv_shared_layers",
    "enable_moe_block", "use_double_wide_mlp", "per_layer_config", "global_head_dim", "num_global_key_value_heads"}
#: transformers' Gemma4TextConfig defaults, for a field the file leaves out
DEFAULTS: dict[str, Any] = dict(head_dim=256, num_key_value_heads=4, sliding_window=512, rms_norm_eps=1e-6,
                                hidden_size_per_layer_input=256, global_head_dim=512)
#: transformers' default RoPE of each layer type
DEFAULT_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                   "rope_theta": 1000000.0}}
#: a block's names -> ours beyond Llama's and Gemma's sandwich norms
_GEMMA4_LAYER = {"layer_scalar": "layer_scalar", "per_layer_input_gate.weight": "per_layer_input_gate.weight",
                 "per_layer_projection.weight": "per_layer_projection.weight",
                 "post_per_layer_input_norm.weight": "post_per_layer_input_norm.weight"}
_GEMMA4_MODEL = {"model.embed_tokens_per_layer.weight": "layer_emb.weight",
                 "model.per_layer_model_projection.weight": "layer_proj.weight",
                 "model.per_layer_projection_norm.weight": "layer_proj_norm.weight"}


def layer_types_of(raw: dict[str, Any], layers: int, path: Path) -> list[str]:
    """Each layer's type: ``layer_types`` (transformers' default: five sliding to one global), the last one global
    (transformers makes it so whatever the file says)."""
    types = raw.get("layer_types") or ["sliding_attention" if (i + 1) % 6 else "full_attention"
                                       for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers \
            or not set(types) <= {"sliding_attention", "full_attention"}:
        raise _refuse(path, "layer_types", types, tr("one of sliding_attention, full_attention per layer ({layers})",
                                                     layers=layers))
    return [*types[:-1], "full_attention"]


def rope_per_type(raw: dict[str, Any], path: Path) -> tuple[float, float, float, dict[str, Any] | None]:
    """``(sliding base, global base, global fraction, global scaling)`` from ``rope_parameters``."""
    params = raw.get("rope_parameters") or DEFAULT_ROPE
    if not isinstance(params, dict) or set(params) - set(DEFAULT_ROPE):
        raise _refuse(path, "rope_parameters", params, tr("one dict per layer type (sliding_attention, "
                                                          "full_attention)"))
    local = dict(params.get("sliding_attention") or DEFAULT_ROPE["sliding_attention"])
    if local.pop("rope_type", "default") != "default" or set(local) - {"rope_theta"}:
        raise _refuse(path, "rope_parameters", params, tr("the sliding layers' RoPE is plain (rope_type default, "
                                                          "rope_theta)"))
    full = dict(params.get("full_attention") or DEFAULT_ROPE["full_attention"])
    kind = full.pop("rope_type", "default")
    fraction, factor = full.pop("partial_rotary_factor", 1.0), full.pop("factor", 1.0)
    if kind not in ("default", "proportional") or set(full) - {"rope_theta"} \
            or (kind == "default" and (fraction != 1.0 or factor != 1.0)):
        raise _refuse(path, "rope_parameters", params, tr("the global layers' RoPE is plain or proportional "
                                                          "(partial_rotary_factor, a linear factor)"))
    scaling = None if factor == 1.0 else {"type": "linear", "factor": factor}
    return local.get("rope_theta", 10000.0), full.get("rope_theta", 10000.0), fraction, scaling


def global_heads(raw: dict[str, Any], types: list[str], path: Path) -> tuple[int, int | None]:
    """The global layers' ``(head size, key/value heads or None: the sliding layers')``: ``per_layer_config``, the
    same override on every global layer and on no other, or the older top-level fields."""
    overrides = raw.get("per_layer_config")
    if overrides is None:
        kv = raw.get("num_global_key_value_heads") if raw.get("attention_k_eq_v") else None
        return raw.get("global_head_dim") or DEFAULTS["global_head_dim"], kv
    full = {i for i, kind in enumerate(types) if kind == "full_attention"}
    # the layers by index, as transformers writes them: decimal strings padded to one width ("05", "11")
    layers = {int(k): v for k, v in overrides.items() if str(k).isdigit()} if isinstance(overrides, dict) else {}
    values = [layers[i] for i in sorted(full) if i in layers]
    if not isinstance(overrides, dict) or len(layers) != len(overrides) or set(layers) != full \
            or any(v != values[0] for v in values) or not isinstance(values[0], dict) \
            or set(values[0]) - {"head_dim", "num_key_value_heads"}:
        raise _refuse(path, "per_layer_config", overrides, tr("the same head_dim (and num_key_value_heads) on every "
                                                              "full_attention layer, and on no other"))
    return values[0].get("head_dim", raw.get("head_dim", DEFAULTS["head_dim"])), values[0].get("num_key_value_heads")


def read_config(raw: dict[str, Any], path: Path) -> Gemma4Config:
    """A Gemma 4 text ``config.json`` (``raw``, read from ``path``) -> its config."""
    refuse_unknown_fields(FAMILY, raw, path, READ)
    act = raw.get("hidden_activation") or "gelu_pytorch_tanh"
    if act != "gelu_pytorch_tanh":
        raise _refuse(path, "hidden_activation", act, tr("Gemma's feed-forward gates with GELU's tanh form "
                                                          "(gelu_pytorch_tanh)"))
    for field, off in (("use_bidirectional_attention", None), ("enable_moe_block", False)):
        if raw.get(field) not in (off, False, None):
            raise _refuse(path, field, raw[field], tr("the decoder attends causally, with one feed-forward a layer"))
    raw = {**DEFAULTS, **{k: v for k, v in raw.items() if v is not None}}
    shapes = _shapes(raw, path)
    layers, vocab = shapes["num_layers"], shapes["vocab_size"]
    d_layer_input = raw["hidden_size_per_layer_input"] or 0
    if d_layer_input and raw.get("vocab_size_per_layer_input", vocab) != vocab:
        raise _refuse(path, "vocab_size_per_layer_input", raw["vocab_size_per_layer_input"],
                      tr("the per-layer table has a row per token of the vocabulary ({vocab})", vocab=vocab))
    types = layer_types_of(raw, layers, path)
    local_base, base, fraction, scaling = rope_per_type(raw, path)
    global_head_dim, global_kv = global_heads(raw, types, path)
    bias = bool(raw.get("attention_bias", False))
    return _build(Gemma4Config, path, **shapes, qkv_bias=bias, out_bias=bias, rope_base=base, rope_scaling=scaling,
                  rope_local_base=local_base, global_rope_fraction=fraction,
                  sliding_window=_within_context(raw, raw["sliding_window"], path), layer_types=types,
                  global_head_dim=global_head_dim, num_global_kv_heads=global_kv,
                  k_eq_v=bool(raw.get("attention_k_eq_v", False)),
                  num_kv_shared_layers=raw.get("num_kv_shared_layers", 0),
                  double_wide_mlp=bool(raw.get("use_double_wide_mlp", False)), d_layer_input=d_layer_input,
                  final_softcap=raw.get("final_logit_softcapping"),
                  tie_weights=bool(raw.get("tie_word_embeddings", True)))


def layout(shapes: dict[str, torch.Size], config: Gemma4Config) -> dict[str, Expected]:
    """Gemma 4's names -> ours: Gemma 3's (sandwich norms, QK-norm; a shared-KV layer stores no keys), each layer's
    ``layer_scalar`` and per-layer input maps, and the model's per-layer table and projection."""
    names = llama_layout(shapes, config.num_layers, config.tie_weights, sandwich=True)
    pairs = dict(_GEMMA4_MODEL)
    for i in range(config.num_layers):
        pairs.update({f"model.layers.{i}.{theirs}": f"blocks.{i}.{ours}" for theirs, ours in _GEMMA4_LAYER.items()})
    names.update({theirs: Expected(tuple(shapes[ours]), _as_is(ours)) for theirs, ours in pairs.items()
                  if ours in shapes})
    return names
