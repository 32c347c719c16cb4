"""Qwen3-Next (``qwen3_next``) and Qwen3.5's language models, dense (``qwen3_5_text``) and MoE
(``qwen3_5_moe_text``): ``config.json`` -> a :class:`~attnlab.models.modern.qwen3_next.Qwen3NextConfig`, and their
tensors -> attnlab's names.

Fields read, as transformers 5 writes them (and the top-level ``rope_theta``, ``partial_rotary_factor`` and
``full_attention_interval`` of the files written before it):

* the Llama-like sizes, ``head_dim``, ``attention_bias``, ``tie_word_embeddings``, ``rms_norm_eps``;
* ``layer_types`` (``"linear_attention"`` or ``"full_attention"`` per layer; absent: every
  ``full_attention_interval``-th layer full);
* the DeltaNet's ``linear_num_key_heads``, ``linear_num_value_heads``, ``linear_key_head_dim``,
  ``linear_value_head_dim``, ``linear_conv_kernel_dim``;
* RoPE: ``rope_parameters`` (``rope_theta``, ``partial_rotary_factor``, a scaling), and Qwen3.5's multimodal
  ``mrope_section`` / ``mrope_interleaved``. Multimodal RoPE gives each frequency of the turned features to one of
  three axes (time, height, width; ``mrope_section`` frequencies each, interleaved or in blocks); a text token sits
  at the same position on all three, so every frequency turns by the same angle whichever axis it belongs to, and
  the result is partial RoPE. Read, checked (three counts >= 0 within the turned frequencies), and reduced;
* Qwen3-Next's feed-forward: ``num_experts`` (0: every layer dense), ``num_experts_per_tok``,
  ``moe_intermediate_size``, ``shared_expert_intermediate_size``, ``norm_topk_prob``, and which layers are
  mixtures: ``decoder_sparse_step``, ``mlp_only_layers`` (a mixture of experts in each layer ``i`` with ``(i + 1) %
  decoder_sparse_step == 0`` not listed there; the others a SwiGLU of ``intermediate_size``). Qwen3.5-MoE's config
  has the first four only: every layer is a mixture, its top-k weights always renormalised (transformers'
  ``Qwen3_5MoeTopKRouter``), and there is no dense width.

Refused by name: another ``hidden_act``, ``use_sliding_window`` (transformers' layers attend to every key),
``attn_output_gate: false`` (transformers' Qwen3.5 gates every full layer regardless), a ``mamba_ssm_dtype`` other
than float32 (the memory is kept in float32), and any field neither read nor known to change nothing.

Tensors: the Llama names for the full layers (``self_attn.q_proj`` holds the query and the gate, per head ``[query
| gate]``: split into ``W_query`` and ``W_gate``), ``linear_attn.*`` for the DeltaNet layers: Qwen3.5's
``in_proj_qkv``, ``in_proj_z``, ``in_proj_b``, ``in_proj_a`` as they are; Qwen3-Next's ``in_proj_qkvz`` and
``in_proj_ba``, fused per key head (``[q_h, k_h, v_group, z_group]`` and ``[b_group, a_group]``), taken apart into
the same four. A mixture's experts are stored one tensor each (``mlp.experts.{e}.gate_proj.weight``, as
Qwen's files and transformers' ``save_pretrained`` write them; transformers fuses them in memory, not on disk) and
stacked here into the experts' ``(E, ·, ·)`` parameters, beside ``mlp.gate`` (the router), ``mlp.shared_expert.*``
and ``mlp.shared_expert_gate``. The multi-token-prediction head (``mtp.*``) is not part of the language model:
skipped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnlab.i18n import tr
from attnlab.models.modern.qwen3_next import LAYER_KINDS, Qwen3NextConfig, interleaved_layer_types
from attnlab.pretrained.checkpoint_files import Expected, read_tensors
from attnlab.pretrained.config_fields import _LLAMA_LIKE, refuse_unknown_fields
from attnlab.pretrained.decoder_configs import _build, _need, _refuse, _shapes, rope_of
from attnlab.pretrained.decoder_weights import IGNORED, _as_is, llama_layout
from attnlab.pretrained.deepseek import _PART, _stack_experts

#: stored beside the language model but not part of it: the multi-token-prediction head
SKIPPED = re.compile(rf"{IGNORED.pattern}|^mtp\.")

_LINEAR = frozenset(("linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
                     "linear_num_value_heads", "layer_types", "full_attention_interval", "attention_bias",
                     "use_sliding_window", "attn_output_gate", "mamba_ssm_dtype"))
#: the fields each family's reader looks at; and those of a multi-token-prediction head or a training loss only
_EXPERTS = frozenset(("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"))
READ = {"qwen3_next": _LLAMA_LIKE | _LINEAR | _EXPERTS | {"decoder_sparse_step", "mlp_only_layers", "norm_topk_prob"},
        "qwen3_5_text": _LLAMA_LIKE | _LINEAR, "qwen3_5_moe_text": _LLAMA_LIKE | _LINEAR | _EXPERTS}
INERT = frozenset(("output_router_logits", "router_aux_loss_coef", "mtp_num_hidden_layers",
                   "mtp_use_dedicated_embeddings"))


def _multimodal_rope(params: dict[str, Any], rotary_dim: int, path: Path) -> None:
    """Qwen3.5's ``mrope_section`` and ``mrope_interleaved``, taken out of ``params`` and checked: text positions
    reduce them to partial RoPE (the module docstring), for any three counts that fit the turned frequencies."""
    section = params.pop("mrope_section", None)
    interleaved = params.pop("mrope_interleaved", None)
    if interleaved is not None and not isinstance(interleaved, bool):
        raise _refuse(path, "mrope_interleaved", interleaved, tr("expected true or false"))
    if section is None:
        return
    fits = isinstance(section, list) and len(section) == 3 and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in section)
    if not fits or sum(section) > rotary_dim // 2:
        raise _refuse(path, "mrope_section", section, tr("multimodal RoPE gives each of the {pairs} turned frequency "
                                                         "pairs to one of three axes (time, height, width): expected "
                                                         "three counts >= 0 summing to at most {pairs}",
                                                         pairs=rotary_dim // 2))


def _rope(raw: dict[str, Any], head_dim: int, path: Path) -> tuple[float, dict[str, Any] | None, float]:
    """``(base, scaling, partial_rotary_factor)``, the multimodal fields reduced."""
    params = dict(raw.get("rope_parameters") or {})
    factor = params.pop("partial_rotary_factor", raw.get("partial_rotary_factor", 1.0))
    if isinstance(factor, bool) or not isinstance(factor, int | float):
        raise _refuse(path, "partial_rotary_factor", factor, tr("expected a number in (0, 1]"))
    _multimodal_rope(params, int(head_dim * factor), path)
    rest = {k: v for k, v in raw.items() if k not in ("rope_parameters", "partial_rotary_factor")}
    base, scaling = rope_of({**rest, "rope_parameters": params} if params else rest, path)
    return base, scaling, factor


def _feed_forward(family: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The mixture-of-experts fields: Qwen3-Next's (its layers chosen by ``decoder_sparse_step`` and
    ``mlp_only_layers``), Qwen3.5-MoE's (every layer, renormalised); none in Qwen3.5's dense model (refused there as
    unknown). Each defaults to its transformers config's where config.json leaves it out."""
    if family == "qwen3_5_text":
        return {}
    if family == "qwen3_next":
        fields = dict(num_experts=raw.get("num_experts") or 0, mlp_only_layers=raw.get("mlp_only_layers") or [],
                      decoder_sparse_step=_or(raw, "decoder_sparse_step", 1),
                      norm_topk_prob=_or(raw, "norm_topk_prob", True))
        defaults = dict(num_experts_per_tok=10, moe_intermediate_size=512, shared_expert_intermediate_size=512)
    else:
        fields = dict(num_experts=_or(raw, "num_experts", 256), norm_topk_prob=True)
        defaults = dict(num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512)
    return {**fields, **{name: _or(raw, name, default) for name, default in defaults.items()}}


def _or(raw: dict[str, Any], name: str, default: Any) -> Any:
    """``raw[name]``, or ``default`` where config.json leaves it out or writes null (a 0 or false is kept, to be
    checked)."""
    return default if raw.get(name) is None else raw[name]


def read_config(family: str, raw: dict[str, Any], path: Path) -> Qwen3NextConfig:
    """A ``qwen3_next``, ``qwen3_5_text`` or ``qwen3_5_moe_text`` ``config.json`` -> :class:`Qwen3NextConfig` (the
    module docstring)."""
    refuse_unknown_fields(family, {k: v for k, v in raw.items() if k not in INERT}, path, READ[family])
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise _refuse(path, "hidden_act", act, tr("the SwiGLU feed-forward and the short convolution use SiLU"))
    if raw.get("use_sliding_window"):
        raise _refuse(path, "use_sliding_window", raw["use_sliding_window"],
                      tr("transformers' {family} attends to every key", family=family))
    if raw.get("attn_output_gate", True) is not True:
        raise _refuse(path, "attn_output_gate", raw["attn_output_gate"],
                      tr("transformers' {family} gates every full-attention layer", family=family))
    if raw.get("mamba_ssm_dtype", "float32") != "float32":
        raise _refuse(path, "mamba_ssm_dtype", raw["mamba_ssm_dtype"], tr("the memory is kept in float32"))
    # Qwen3.5-MoE has no dense layer, and no intermediate_size: the width is built nowhere
    shapes = _shapes({"intermediate_size": _or(raw, "moe_intermediate_size", 512)} | raw
                     if family == "qwen3_5_moe_text" else raw, path)
    layers = shapes["num_layers"]
    if shapes["head_dim"] is None:
        shapes["head_dim"] = shapes["d_model"] // shapes["num_heads"]
    types = raw.get("layer_types") or interleaved_layer_types(layers, raw.get("full_attention_interval") or 4)
    base, scaling, factor = _rope(raw, shapes["head_dim"], path)
    bias = bool(raw.get("attention_bias", False))
    return _build(
        Qwen3NextConfig, path, **shapes, qkv_bias=bias, out_bias=bias, rope_base=base, rope_scaling=scaling,
        partial_rotary_factor=factor, layer_types=types,
        tie_weights=bool(raw.get("tie_word_embeddings", False)),
        linear_num_key_heads=_need(raw, "linear_num_key_heads", path),
        linear_num_value_heads=_need(raw, "linear_num_value_heads", path),
        linear_key_head_dim=_need(raw, "linear_key_head_dim", path),
        linear_value_head_dim=_need(raw, "linear_value_head_dim", path),
        linear_conv_kernel=raw.get("linear_conv_kernel_dim", 4), **_feed_forward(family, raw),
    )


def _query_and_gate(ours: str, heads: int):
    """``q_proj`` ``(heads · 2 · hd, in)`` (or its bias), per head ``[query | gate]`` -> ``W_query`` and
    ``W_gate``."""
    def convert(t: Tensor) -> dict[str, Tensor]:
        kind = "weight" if t.dim() == 2 else "bias"
        per_head = t.reshape(heads, 2, -1, *t.shape[1:])  # (H, 2, hd, in): query rows, then gate rows
        return {f"{ours}.W_query.{kind}": per_head[:, 0].reshape(-1, *t.shape[1:]).contiguous(),
                f"{ours}.W_gate.{kind}": per_head[:, 1].reshape(-1, *t.shape[1:]).contiguous()}
    return convert


def _unfused_qkvz(ours: str, c: Qwen3NextConfig):
    """Qwen3-Next's ``in_proj_qkvz`` ``(Hk · (2 d_k + 2 r d_v), d)``, per key head ``[q_h, k_h, v_group,
    z_group]`` (``r`` value heads per key head) -> ``in_proj_qkv`` (all q, all k, all v) and ``in_proj_z``."""
    hk, dk, group = c.linear_num_key_heads, c.linear_key_head_dim, c.linear_num_value_heads // c.linear_num_key_heads
    dv = group * c.linear_value_head_dim

    def convert(t: Tensor) -> dict[str, Tensor]:
        q, k, v, z = t.reshape(hk, 2 * dk + 2 * dv, -1).split((dk, dk, dv, dv), dim=1)
        rows = lambda x: x.reshape(-1, t.shape[-1])  # noqa: E731 (key head by key head)
        return {f"{ours}.in_proj_qkv.weight": torch.cat([rows(q), rows(k), rows(v)]).contiguous(),
                f"{ours}.in_proj_z.weight": rows(z).contiguous()}
    return convert


def _unfused_ba(ours: str, c: Qwen3NextConfig):
    """Qwen3-Next's ``in_proj_ba`` ``(2 Hv, d)``, per key head ``[b_group, a_group]`` -> ``in_proj_b`` and
    ``in_proj_a``."""
    hk, group = c.linear_num_key_heads, c.linear_num_value_heads // c.linear_num_key_heads

    def convert(t: Tensor) -> dict[str, Tensor]:
        b, a = t.reshape(hk, 2 * group, -1).split((group, group), dim=1)
        return {f"{ours}.in_proj_b.weight": b.reshape(-1, t.shape[-1]).contiguous(),
                f"{ours}.in_proj_a.weight": a.reshape(-1, t.shape[-1]).contiguous()}
    return convert


_LINEAR_TENSORS = ("in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight", "conv1d.weight",
                   "A_log", "dt_bias", "norm.weight", "out_proj.weight")


def layout(family: str, shapes: dict[str, torch.Size], c: Qwen3NextConfig) -> dict[str, Expected]:
    """Checkpoint names -> ours, with the shapes the checkpoint stores (the module docstring)."""
    expected = llama_layout(shapes, c.num_layers, c.tie_weights)
    for i, kind in enumerate(c.layer_types or ()):  # always set by the config
        theirs, ours = f"model.layers.{i}.", f"blocks.{i}.attn"
        if kind == "full_attention":
            for part in ("weight", "bias"):
                q = f"{ours}.W_query.{part}"
                if q in shapes:
                    expected.pop(f"{theirs}self_attn.q_proj.{part}")
                    stored = (2 * shapes[q][0], *shapes[q][1:])
                    expected[f"{theirs}self_attn.q_proj.{part}"] = Expected(stored, _query_and_gate(ours, c.num_heads))
            continue
        for name in [n for n in expected if n.startswith(f"{theirs}self_attn.")]:  # its out_proj is the DeltaNet's
            expected.pop(name)
        for name in _LINEAR_TENSORS:
            mine = f"{ours}.{name}"
            expected[f"{theirs}linear_attn.{name}"] = Expected(tuple(shapes[mine]), _as_is(mine))
        if family == "qwen3_next":  # fused per key head: taken apart
            qkv, z = shapes[f"{ours}.in_proj_qkv.weight"], shapes[f"{ours}.in_proj_z.weight"]
            b, a = shapes[f"{ours}.in_proj_b.weight"], shapes[f"{ours}.in_proj_a.weight"]
            for name in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"):
                expected.pop(f"{theirs}linear_attn.{name}.weight")
            expected[f"{theirs}linear_attn.in_proj_qkvz.weight"] = Expected((qkv[0] + z[0], qkv[1]),
                                                                            _unfused_qkvz(ours, c))
            expected[f"{theirs}linear_attn.in_proj_ba.weight"] = Expected((b[0] + a[0], b[1]), _unfused_ba(ours, c))
    for i, sparse in enumerate(c.moe_layer_flags):
        if sparse:
            expected.update(_mixture_layout(shapes, i))
    return expected


_MIXTURE = {"mlp.gate.weight": "ff.router.weight", "mlp.shared_expert_gate.weight": "ff.shared_expert_gate.weight",
            **{f"mlp.shared_expert.{p}.weight": f"ff.shared_experts.{p}.weight"
               for p in ("gate_proj", "up_proj", "down_proj")}}


def _mixture_layout(shapes: dict[str, torch.Size], i: int) -> dict[str, Expected]:
    """Layer ``i``'s mixture of experts: the router, the shared expert and its gate as they are; each expert's three
    projections to row ``e`` of ours (``<ours>#<e>``, stacked by :func:`read_state`)."""
    theirs, ours = f"model.layers.{i}.", f"blocks.{i}."
    expected = {theirs + name: Expected(tuple(shapes[ours + mine]), _as_is(ours + mine))
                for name, mine in _MIXTURE.items()}
    for proj in ("gate_proj", "up_proj", "down_proj"):
        stacked = shapes[f"{ours}ff.experts.{proj}"]
        for e in range(stacked[0]):
            expected[f"{theirs}mlp.experts.{e}.{proj}.weight"] = Expected(
                tuple(stacked[1:]), _as_is(f"{ours}ff.experts.{proj}{_PART}{e}"))
    return expected


def read_state(family: str, model_dir: Path, model: Any, dtype: torch.dtype) -> dict[str, Tensor]:
    """The model's tensors from ``model_dir`` by :func:`layout`, checked name by name and shape by shape, each
    mixture's experts stacked."""
    shapes = {name: t.shape for name, t in model.state_dict().items()}
    return _stack_experts(read_tensors(model_dir, layout(family, shapes, model.config), SKIPPED, dtype))


__all__ = ["LAYER_KINDS", "READ", "SKIPPED", "layout", "read_config", "read_state"]
