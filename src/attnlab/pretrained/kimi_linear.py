"""Kimi Linear checkpoints (``kimi_linear``): ``config.json`` -> a
:class:`~attnlab.models.modern.kimi_linear.KimiLinearConfig`, the tensors' names -> the model's.

The config, as Moonshot's files and transformers 5's ``save_pretrained`` write it (either names):

* the sizes: ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``intermediate_size``,
  ``model_max_length`` (transformers' ``max_position_embeddings``), ``rms_norm_eps``, ``tie_word_embeddings``;
* the MLA layers: ``kv_lora_rank``, ``q_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``,
  ``attention_bias``; ``qk_head_dim`` must be their sum and ``num_key_value_heads`` the heads (transformers derives
  both; ``head_dim``, which it overwrites with ``qk_rope_head_dim``, is not read);
* the KDA layers: Moonshot's ``linear_attn_config`` (``num_heads``, ``head_dim``, ``short_conv_kernel_size``, and
  ``kda_layers`` / ``full_attn_layers`` counted from 1) or transformers' flat ``linear_num_heads``,
  ``linear_head_dim``, ``linear_conv_kernel_dim`` and ``layer_types``; both may be there, and must then agree;
* the mixture: ``num_experts``, ``num_experts_per_token``, ``moe_intermediate_size``, ``num_shared_experts``,
  ``num_expert_group``, ``topk_group``, ``moe_renormalize``, ``routed_scaling_factor`` (or transformers' attribute
  names ``num_local_experts``, ``num_experts_per_tok``, ``n_shared_experts``, ``n_group``, ``norm_topk_prob``), and
  which layers have it: ``mlp_layer_types``, or ``first_k_dense_replace`` (transformers' default 1).

Refused by name, as what transformers' Kimi Linear does not compute: ``mla_use_nope: false`` (its MLA never rotates),
a RoPE scaling (nothing is rotated to scale, and DeepSeek's YaRN factor on the scores is not applied), a router other
than ``moe_router_activation_func: sigmoid``, ``moe_layer_freq`` other than 1, ``use_grouped_topk: false`` with
more than one group, multi-token-prediction layers, another ``hidden_act``, and any key of ``linear_attn_config``
but the five above (other models of the family, GLM's and Kimi's later ones, put their own options there).

The tensors keep Moonshot's names (``save_pretrained`` writes them back so): the MoE under ``block_sparse_moe``,
one tensor per expert ``experts.{e}.w1`` (gate), ``w3`` (up), ``w2`` (down), stacked here as DeepSeek's are; a dense
feed-forward under ``mlp`` (Moonshot's files) or ``block_sparse_moe`` (transformers' rewrite); the KDA layer's
three convolutions ``q_conv1d``, ``k_conv1d``, ``v_conv1d`` joined into one over q, k and v side by side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor

from attnlab.i18n import tr
from attnlab.models.modern.kimi_linear import KimiLinearConfig, KimiLinearModel, layer_types_from_lists
from attnlab.pretrained.checkpoint_files import Expected, read_tensors, shard_files
from attnlab.pretrained.config_fields import refuse_unknown_fields
from attnlab.pretrained.decoder_configs import _build, _need, _refuse
from attnlab.pretrained.decoder_weights import IGNORED
from attnlab.pretrained.deepseek import _PART, _stack_experts

FAMILY = "kimi_linear"
#: config.json's field -> transformers' attribute name for it (both are read, and must agree)
_ALIASES = {"model_max_length": "max_position_embeddings", "num_experts": "num_local_experts",
            "num_experts_per_token": "num_experts_per_tok", "num_shared_experts": "n_shared_experts",
            "num_expert_group": "n_group", "moe_renormalize": "norm_topk_prob",
            "linear_num_heads": "num_heads", "linear_head_dim": "head_dim",
            "linear_conv_kernel_dim": "short_conv_kernel_size"}
_LINEAR_KEYS = ("num_heads", "head_dim", "short_conv_kernel_size", "kda_layers", "full_attn_layers")
#: the fields read here (both names of each alias; the flat linear_* ones under their own names only)
READ = frozenset((
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "intermediate_size", "rms_norm_eps", "hidden_act", "tie_word_embeddings", "attention_bias", "kv_lora_rank",
    "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "qk_head_dim", "v_head_dim", "moe_intermediate_size",
    "topk_group", "routed_scaling_factor", "first_k_dense_replace", "mlp_layer_types", "layer_types",
    "linear_attn_config", "mla_use_nope", "moe_router_activation_func", "moe_layer_freq", "use_grouped_topk",
    "num_nextn_predict_layers", "rope_scaling", "rope_parameters",
    *_ALIASES, *(v for k, v in _ALIASES.items() if not k.startswith("linear_"))))
#: fields that change nothing transformers computes: ``head_dim`` (it overwrites it with ``qk_rope_head_dim``), the
#: RoPE base of layers that turn nothing, the training's router loss
INERT = frozenset(("head_dim", "rope_theta", "output_router_logits", "router_aux_loss_coef"))


def _field(raw: dict[str, Any], name: str, path: Path, default: Any = None, linear: dict[str, Any] | None = None,
           required: bool = False) -> Any:
    """``raw[name]``, or its other name (transformers' attribute in ``raw``, or the key of ``linear``, Moonshot's
    ``linear_attn_config``): both given must agree."""
    other = _ALIASES[name]
    alias = (f"linear_attn_config['{other}']", linear.get(other)) if linear is not None else (other, raw.get(other))
    values = {n: v for n, v in ((name, raw.get(name)), alias) if v is not None}
    if len({repr(v) for v in values.values()}) > 1:
        (first, value), (second, want) = values.items()
        raise _refuse(path, first, value, tr("{second}={want!r} says otherwise", second=second, want=want))
    if values:
        return next(iter(values.values()))
    if required:
        return _need(raw, name, path)
    return default


def _check(raw: dict[str, Any], path: Path) -> None:
    """The fields whose other values transformers' Kimi Linear does not compute, refused by name."""
    fine = {"hidden_act": ("silu", tr("the SwiGLU feed-forwards and the short convolutions use SiLU")),
            "mla_use_nope": (True, tr("Kimi Linear's MLA layers carry no RoPE")),
            "moe_router_activation_func": ("sigmoid", tr("the router scores the experts with a sigmoid")),
            "moe_layer_freq": (1, tr("every layer after the dense ones is a mixture of experts")),
            "num_nextn_predict_layers": (0, tr("transformers' Kimi Linear has no multi-token-prediction layers"))}
    for field, (want, why) in fine.items():
        if raw.get(field, want) != want:
            raise _refuse(path, field, raw[field], why)
    if raw.get("rope_scaling") is not None:
        raise _refuse(path, "rope_scaling", raw["rope_scaling"], tr("no layer turns by RoPE, so nothing is scaled"))
    params = raw.get("rope_parameters")
    if params is not None and (not isinstance(params, dict) or params.get("rope_type", "default") != "default"):
        raise _refuse(path, "rope_parameters", params, tr("no layer turns by RoPE, so nothing is scaled"))
    groups = _field(raw, "num_expert_group", path, 1)
    if raw.get("use_grouped_topk") is False and groups != 1:
        raise _refuse(path, "use_grouped_topk", False, tr("transformers' router always keeps the topk_group best of "
                                                          "the num_expert_group={groups} groups", groups=groups))
    heads, rope, nope = (_need(raw, name, path) for name in ("num_attention_heads", "qk_rope_head_dim",
                                                              "qk_nope_head_dim"))
    if raw.get("num_key_value_heads") not in (None, heads):
        raise _refuse(path, "num_key_value_heads", raw["num_key_value_heads"],
                      tr("multi-head latent attention gives each of the num_attention_heads={heads} heads its own "
                         "keys and values", heads=heads))
    if raw.get("qk_head_dim") not in (None, rope + nope):
        raise _refuse(path, "qk_head_dim", raw["qk_head_dim"], tr("expected {want} for these head sizes",
                                                                 want=rope + nope))


def _layer_types(raw: dict[str, Any], linear: dict[str, Any], layers: int, path: Path) -> list[str] | None:
    """``layer_types``, from itself or from ``linear_attn_config``'s lists (from 1; every layer in exactly one); None:
    neither (transformers' default)."""
    kda, full = linear.get("kda_layers"), linear.get("full_attn_layers")
    from_lists = None
    if (kda is None) != (full is None):
        name = "kda_layers" if full is None else "full_attn_layers"
        raise _refuse(path, f"linear_attn_config['{name}']", kda if full is None else full,
                      tr("give kda_layers and full_attn_layers together (transformers reads neither alone)"))
    if kda is not None and full is not None:
        listed = list(kda) + list(full) if isinstance(kda, list) and isinstance(full, list) else []
        numbers = all(isinstance(n, int) and not isinstance(n, bool) for n in listed)
        if not numbers or sorted(listed) != list(range(1, layers + 1)):
            raise _refuse(path, "linear_attn_config['kda_layers', 'full_attn_layers']", [kda, full],
                          tr("the two lists together number every layer from 1 to num_hidden_layers={layers} once",
                             layers=layers))
        from_lists = layer_types_from_lists(layers, full)
    types = raw.get("layer_types")
    if types is not None and from_lists is not None and list(types) != from_lists:
        raise _refuse(path, "layer_types", types, tr("linear_attn_config's lists say {want}", want=from_lists))
    return list(types) if types is not None else from_lists


def _mlp_layer_types(raw: dict[str, Any], layers: int, path: Path) -> list[str]:
    """``mlp_layer_types``, or the first ``first_k_dense_replace`` layers dense (transformers' default: 1)."""
    dense = raw.get("first_k_dense_replace", 1)
    if isinstance(dense, bool) or not isinstance(dense, int) or dense < 0:
        raise _refuse(path, "first_k_dense_replace", dense, tr("expected an int >= 0"))
    want = ["dense" if i < dense else "sparse" for i in range(layers)]
    types = raw.get("mlp_layer_types")
    if types is None:
        return want
    if "first_k_dense_replace" in raw and list(types) != want:
        raise _refuse(path, "mlp_layer_types", types, tr("first_k_dense_replace={dense} says {want}", dense=dense,
                                                         want=want))
    return list(types)


def read_config(raw: dict[str, Any], path: Path) -> KimiLinearConfig:
    """A ``kimi_linear`` ``config.json`` -> :class:`KimiLinearConfig` (the module docstring)."""
    refuse_unknown_fields(FAMILY, {k: v for k, v in raw.items() if k not in INERT}, path, READ)
    linear = raw.get("linear_attn_config") or {}
    if not isinstance(linear, dict):
        raise _refuse(path, "linear_attn_config", linear, tr("expected an object"))
    for key in linear:
        if key not in _LINEAR_KEYS:
            raise _refuse(path, f"linear_attn_config['{key}']", linear[key],
                          tr("attnlab does not implement this field of a {family} config (it may change what the "
                             "model computes)", family=FAMILY))
    _check(raw, path)
    layers = _need(raw, "num_hidden_layers", path)
    experts = _field(raw, "num_experts", path, required=True)
    return _build(
        KimiLinearConfig, path, vocab_size=_need(raw, "vocab_size", path),
        context_length=_field(raw, "model_max_length", path, required=True), d_model=_need(raw, "hidden_size", path),
        num_layers=layers, num_heads=_need(raw, "num_attention_heads", path),
        d_ff=_need(raw, "intermediate_size", path), norm_eps=raw.get("rms_norm_eps", 1e-5),
        tie_weights=bool(raw.get("tie_word_embeddings", False)), attention_bias=bool(raw.get("attention_bias", False)),
        kv_lora_rank=_need(raw, "kv_lora_rank", path), q_lora_rank=raw.get("q_lora_rank"),
        qk_nope_head_dim=_need(raw, "qk_nope_head_dim", path), qk_rope_head_dim=_need(raw, "qk_rope_head_dim", path),
        v_head_dim=_need(raw, "v_head_dim", path),
        linear_num_heads=_field(raw, "linear_num_heads", path, 32, linear),
        linear_head_dim=_field(raw, "linear_head_dim", path, 128, linear),
        linear_conv_kernel=_field(raw, "linear_conv_kernel_dim", path, 4, linear),
        layer_types=_layer_types(raw, linear, layers, path), mlp_layer_types=_mlp_layer_types(raw, layers, path),
        n_routed_experts=experts, num_experts_per_tok=_field(raw, "num_experts_per_token", path, 8),
        moe_intermediate_size=_need(raw, "moe_intermediate_size", path),
        n_shared_experts=_field(raw, "num_shared_experts", path, 1), n_group=_field(raw, "num_expert_group", path, 1),
        topk_group=raw.get("topk_group") or 1, norm_topk_prob=bool(_field(raw, "moe_renormalize", path, True)),
        routed_scaling_factor=raw.get("routed_scaling_factor", 2.446),
    )


#: a layer's tensors, theirs -> ours, by the layer's kind (the experts and the convolutions apart: joined)
_KDA = {**{f"self_attn.{n}": f"attn.{n}" for n in ("q_proj", "k_proj", "v_proj", "b_proj", "g_a_proj", "g_b_proj",
                                                    "o_norm", "o_proj")},
        "self_attn.f_a_proj": "attn.forget_gate.f_a_proj", "self_attn.f_b_proj": "attn.forget_gate.f_b_proj"}
_MLA = {**{f"self_attn.{n}": f"attn.{n}" for n in ("q_proj", "q_a_proj", "q_a_layernorm", "q_b_proj",
                                                    "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj")},
        "self_attn.o_proj": "attn.out_proj"}
_EXPERT = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj"}  # Mixtral's names of the three


def _as_is(ours: str):
    return lambda t: {ours: t}


def layout(model: KimiLinearModel, names: set[str]) -> dict[str, Expected]:
    """Every tensor of a Kimi Linear checkpoint of ``model``'s config, by its name, with its stored shape; ``names``:
    the checkpoint's, which say where its dense feed-forwards are (``mlp`` or ``block_sparse_moe``)."""
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    c = model.config
    pairs = {"model.embed_tokens.weight": "tok_emb.weight", "model.norm.weight": "norm_f.weight",
             "lm_head.weight": "head.weight"}
    parts: dict[str, Expected] = {}
    for i, (kind, sparse) in enumerate(zip(c.kinds, c.moe_layer_flags, strict=True)):
        theirs, ours = f"model.layers.{i}.", f"blocks.{i}."
        pairs |= {f"{theirs}input_layernorm.weight": f"{ours}norm1.weight",
                  f"{theirs}post_attention_layernorm.weight": f"{ours}norm2.weight"}
        if kind == "linear_attention":
            pairs |= {f"{theirs}{t}.weight": f"{ours}{o}.weight" for t, o in _KDA.items()}
            pairs |= {f"{theirs}self_attn.{n}": f"{ours}attn.forget_gate.{n}" for n in ("A_log", "dt_bias")}
            conv = shapes[f"{ours}attn.conv1d.weight"]
            for j, part in enumerate("qkv"):  # q, k and v side by side: part j in rows j · H · d onwards
                parts[f"{theirs}self_attn.{part}_conv1d.weight"] = Expected(
                    (conv[0] // 3, *conv[1:]), _as_is(f"{ours}attn.conv1d.weight{_PART}{j}"))
        else:
            pairs |= {f"{theirs}{t}.{k}": f"{ours}{o}.{k}" for t, o in _MLA.items() for k in ("weight", "bias")}
        moe = f"{theirs}block_sparse_moe."
        if not sparse:
            dense = f"{theirs}mlp." if f"{theirs}mlp.gate_proj.weight" in names else moe
            pairs |= {f"{dense}{n}.weight": f"{ours}ff.{n}.weight" for n in ("gate_proj", "up_proj", "down_proj")}
            continue
        pairs |= {f"{moe}gate.weight": f"{ours}ff.router.weight",
                  f"{moe}gate.e_score_correction_bias": f"{ours}ff.router.e_score_correction_bias",
                  **{f"{moe}shared_experts.{n}.weight": f"{ours}ff.shared_experts.{n}.weight"
                     for n in ("gate_proj", "up_proj", "down_proj")}}
        for w, proj in _EXPERT.items():
            stacked = shapes[f"{ours}ff.experts.{proj}"]
            for e in range(stacked[0]):
                parts[f"{moe}experts.{e}.{w}.weight"] = Expected(stacked[1:],
                                                                 _as_is(f"{ours}ff.experts.{proj}{_PART}{e}"))
    expected = {theirs: Expected(shapes[ours], _as_is(ours), optional=c.tie_weights and ours == "head.weight")
                for theirs, ours in pairs.items() if ours in shapes}
    return {**expected, **parts}


def read_state(model_dir: Path, model: KimiLinearModel, dtype: torch.dtype) -> dict[str, Tensor]:
    """The model's tensors from ``model_dir``, checked name by name and shape by shape; the experts stacked, each KDA
    layer's three convolutions joined into one (``(3, H · d, 1, K)`` -> ``(3 · H · d, 1, K)``: q, then k, then v)."""
    names: set[str] = set()
    for file in shard_files(model_dir):
        try:
            with safe_open(str(file), framework="pt") as f:
                names |= set(f.keys())
        except SafetensorError:
            pass  # read_tensors names the file
    state = _stack_experts(read_tensors(model_dir, layout(model, names), IGNORED, dtype))
    for name in [n for n in state if n.endswith("conv1d.weight")]:
        state[name] = state[name].flatten(0, 1)
    return state


__all__ = ["FAMILY", "READ", "layout", "read_config", "read_state"]
