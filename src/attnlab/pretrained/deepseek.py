"""DeepSeek-V2, V3 and V3.2 checkpoints: ``config.json`` -> a
:class:`~attnlab.models.modern.deepseek.DeepseekConfig`, the tensors' names -> the model's.

The config is read field by field as transformers 5 writes it (``rope_parameters``; the older ``rope_scaling`` too);
a field that would change the computation and that the model does not follow is refused with its name and value:
V3's router is the sigmoid ``noaux_tc`` one and V2's a softmax (``scoring_func`` must say so), every layer after
``first_k_dense_replace`` is a mixture (``moe_layer_freq`` 1), V2's router does not renormalise its weights (as
transformers computes it), and an FP8 checkpoint's ``quantization_config`` is not read.

The tensors: transformers' names, one tensor per expert (``mlp.experts.{e}.gate_proj.weight``, as
``save_pretrained`` and DeepSeek's files store them), stacked here into the experts' ``(E, ·, ·)`` parameters; the
router's ``mlp.gate.weight`` and V3's ``e_score_correction_bias``; the attention's names as they are (``o_proj`` is
``out_proj``), V3.2's indexer under ``self_attn.indexer``. DeepSeek-V3's files also hold its
multi-token-prediction modules after the last layer (``num_nextn_predict_layers``): they are no part of the causal
LM, and skipped, as transformers skips them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnlab.i18n import tr
from attnlab.models.modern.deepseek import DeepseekConfig, DeepseekModel
from attnlab.pretrained.checkpoint_files import Expected, read_tensors
from attnlab.pretrained.decoder_configs import _build, _need, _refuse, rope_of
from attnlab.pretrained.decoder_weights import IGNORED

#: ``architectures`` entry -> family (``model_type``)
FAMILIES = {"DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v3",
            "DeepseekV32ForCausalLM": "deepseek_v32"}
#: what each family's router is: scoring, and the top-k methods its transformers model computes
_ROUTERS = {"deepseek_v2": ("softmax", ("greedy", "group_limited_greedy")), "deepseek_v3": ("sigmoid", ("noaux_tc",)),
            "deepseek_v32": ("sigmoid", ("noaux_tc",))}


def _check(family: str, raw: dict[str, Any], path: Path) -> None:
    """The fields whose other values the model does not compute, refused by name."""
    scoring, methods = _ROUTERS[family]
    if raw.get("scoring_func", scoring) != scoring:
        raise _refuse(path, "scoring_func", raw["scoring_func"], tr("a {family} router scores with {scoring}",
                                                                    family=family, scoring=scoring))
    method = raw.get("topk_method", methods[0])
    if method not in methods:
        raise _refuse(path, "topk_method", method, tr("a {family} router chooses by {methods}", family=family,
                                                      methods=", ".join(methods)))
    if raw.get("moe_layer_freq", 1) != 1:
        raise _refuse(path, "moe_layer_freq", raw["moe_layer_freq"],
                      tr("every layer after first_k_dense_replace is a mixture of experts here"))
    if family == "deepseek_v2" and raw.get("norm_topk_prob"):
        raise _refuse(path, "norm_topk_prob", raw["norm_topk_prob"],
                      tr("DeepSeek-V2's router (transformers') does not renormalise the chosen weights"))
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise _refuse(path, "hidden_act", act, tr("the SwiGLU feed-forward gates with SiLU"))
    heads = _need(raw, "num_attention_heads", path)
    if raw.get("num_key_value_heads") not in (None, heads):
        raise _refuse(path, "num_key_value_heads", raw["num_key_value_heads"],
                      tr("multi-head latent attention gives each of the num_attention_heads={heads} heads its own "
                         "keys and values", heads=heads))
    if family == "deepseek_v32":
        _check_layer_lists(raw, path)
        if raw.get("mlp_bias"):
            raise _refuse(path, "mlp_bias", raw["mlp_bias"], tr("DeepSeek-V3.2's feed-forwards have no biases"))
    rope = _need(raw, "qk_rope_head_dim", path)
    for field in ("head_dim", "qk_head_dim"):  # derived by transformers from the two parts: they must agree
        want = rope if field == "head_dim" else rope + _need(raw, "qk_nope_head_dim", path)
        if raw.get(field) not in (None, want):
            raise _refuse(path, field, raw[field], tr("expected {want} for these head sizes", want=want))


def _check_layer_lists(raw: dict[str, Any], path: Path) -> None:
    """DeepSeek-V3.2's per-layer lists, as transformers derives them: every layer ``indexed_attention``, and dense
    feed-forwards for the first ``first_k_dense_replace`` layers only."""
    layers, dense = _need(raw, "num_hidden_layers", path), raw.get("first_k_dense_replace", 0)
    types = raw.get("layer_types")
    if types is not None and list(types) != ["indexed_attention"] * layers:
        raise _refuse(path, "layer_types", types, tr("every layer here is indexed_attention ({layers} of them)",
                                                     layers=layers))
    mlp = raw.get("mlp_layer_types")
    want = ["dense"] * min(dense, layers) + ["sparse"] * max(layers - dense, 0)
    if mlp is not None and list(mlp) != want:
        raise _refuse(path, "mlp_layer_types", mlp, tr("expected {want} (first_k_dense_replace={dense})",
                                                       want=want, dense=dense))


def deepseek_config(family: str, raw: dict[str, Any], path: Path) -> DeepseekConfig:
    """A DeepSeek-V2, V3 or V3.2 ``config.json`` (its family already named: ``deepseek_v2``, ``deepseek_v3`` or
    ``deepseek_v32``)."""
    _check(family, raw, path)
    base, scaling = rope_of(raw, path)
    scoring, methods = _ROUTERS[family]
    return _build(
        DeepseekConfig, path, vocab_size=_need(raw, "vocab_size", path),
        context_length=_need(raw, "max_position_embeddings", path), d_model=_need(raw, "hidden_size", path),
        num_layers=_need(raw, "num_hidden_layers", path), num_heads=_need(raw, "num_attention_heads", path),
        d_ff=_need(raw, "intermediate_size", path), norm_eps=raw.get("rms_norm_eps", 1e-6), rope_base=base,
        rope_scaling=scaling, tie_weights=bool(raw.get("tie_word_embeddings", False)),
        mlp_bias=family == "deepseek_v2" and bool(raw.get("mlp_bias", False)),
        attention_bias=bool(raw.get("attention_bias", False)),
        kv_lora_rank=_need(raw, "kv_lora_rank", path), q_lora_rank=raw.get("q_lora_rank"),
        qk_nope_head_dim=_need(raw, "qk_nope_head_dim", path), qk_rope_head_dim=_need(raw, "qk_rope_head_dim", path),
        v_head_dim=_need(raw, "v_head_dim", path), rope_interleave=bool(raw.get("rope_interleave", True)),
        n_routed_experts=_need(raw, "n_routed_experts", path),
        num_experts_per_tok=_need(raw, "num_experts_per_tok", path),
        moe_intermediate_size=_need(raw, "moe_intermediate_size", path),
        n_shared_experts=raw.get("n_shared_experts") or 0, scoring_func=scoring,
        topk_method=raw.get("topk_method") or methods[0], n_group=raw.get("n_group") or 1,
        topk_group=raw.get("topk_group") or 1, norm_topk_prob=bool(raw.get("norm_topk_prob", False)),
        routed_scaling_factor=raw.get("routed_scaling_factor", 1.0),
        first_k_dense_replace=raw.get("first_k_dense_replace", 0),
        num_nextn_predict_layers=raw.get("num_nextn_predict_layers") or 0,
        **(_sparse(raw, path) if family == "deepseek_v32" else {}),
    )


def _sparse(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """DeepSeek-V3.2's lightning indexer: ``index_topk`` (> 0), its heads and their width."""
    topk = _need(raw, "index_topk", path)
    if isinstance(topk, bool) or not isinstance(topk, int) or topk <= 0:
        raise _refuse(path, "index_topk", topk, tr("each query attends to index_topk > 0 keys"))
    return dict(index_topk=topk, index_n_heads=_need(raw, "index_n_heads", path),
                index_head_dim=_need(raw, "index_head_dim", path))


#: a layer's tensors, theirs -> ours (the experts apart: they are stacked)
_LAYER = {
    "input_layernorm": "norm1", "post_attention_layernorm": "norm2",
    **{f"self_attn.{name}": f"attn.{name}" for name in ("q_proj", "q_a_proj", "q_a_layernorm", "q_b_proj",
                                                        "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj")},
    "self_attn.o_proj": "attn.out_proj",
    **{f"mlp.{name}": f"ff.{name}" for name in ("gate_proj", "up_proj", "down_proj")},
    **{f"mlp.shared_experts.{name}": f"ff.shared_experts.{name}" for name in ("gate_proj", "up_proj", "down_proj")},
    "mlp.gate": "ff.router",
    **{f"self_attn.indexer.{name}": f"attn.indexer.{name}" for name in ("wq_b", "wk", "k_norm", "weights_proj")},
}
#: where one expert's tensor waits before the experts are stacked: ``<ours>#<expert>``
_PART = "#"


def _as_is(ours: str):
    return lambda t: {ours: t}


def deepseek_layout(model: DeepseekModel) -> dict[str, Expected]:
    """Every tensor of a DeepSeek checkpoint of ``model``'s config, by transformers' name, with its shape."""
    shapes = {name: t.shape for name, t in model.state_dict().items()}
    c = model.config
    names = {"model.embed_tokens.weight": "tok_emb.weight", "model.norm.weight": "norm_f.weight",
             "lm_head.weight": "head.weight"}
    layout: dict[str, Expected] = {}
    for i in range(c.num_layers):
        for theirs, ours in _LAYER.items():
            for kind in ("weight", "bias", "e_score_correction_bias"):
                names[f"model.layers.{i}.{theirs}.{kind}"] = f"blocks.{i}.{ours}.{kind}"
        experts = f"blocks.{i}.ff.experts."
        if f"{experts}gate_proj" in shapes:
            for proj in ("gate_proj", "up_proj", "down_proj"):
                shape = tuple(shapes[experts + proj][1:])
                for e in range(shapes[experts + proj][0]):
                    layout[f"model.layers.{i}.mlp.experts.{e}.{proj}.weight"] = Expected(
                        shape, _as_is(f"{experts}{proj}{_PART}{e}"))
    for theirs, ours in names.items():
        if ours in shapes:
            layout[theirs] = Expected(tuple(shapes[ours]), _as_is(ours),
                                      optional=c.tie_weights and ours == "head.weight")
    return layout


def _stack_experts(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """``<name>#<e>`` tensors -> ``<name>`` ``(E, ·, ·)``, expert e in row e (every expert is there: checked by the
    layout)."""
    parts: dict[str, dict[int, Tensor]] = {}
    for key in [k for k in state if _PART in k]:
        name, e = key.split(_PART)
        parts.setdefault(name, {})[int(e)] = state.pop(key)
    for name, experts in parts.items():
        state[name] = torch.stack([experts[e] for e in range(len(experts))])
    return state


def read_deepseek_state(model_dir: Path, model: DeepseekModel, dtype: torch.dtype) -> dict[str, Tensor]:
    """The model's tensors from ``model_dir``, checked name by name and shape by shape, the experts stacked; the
    multi-token-prediction layers after the last one skipped."""
    c = model.config
    mtp = range(c.num_layers, c.num_layers + c.num_nextn_predict_layers)
    ignored = re.compile(IGNORED.pattern + "".join(rf"|^model\.layers\.{i}\." for i in mtp))
    return _stack_experts(read_tensors(model_dir, deepseek_layout(model), ignored, dtype))
