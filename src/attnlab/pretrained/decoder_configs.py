"""``config.json`` of a Hugging Face causal language model -> an attnlab config, refusing what it cannot honour.

A field that would change what the model computes, and that attnlab's model does not implement (an unknown RoPE
scaling, a partial rotary dimension, bidirectional attention, a field attnlab does not know at all), is a
ValueError naming the field and its value: never a model that loads and computes something else
(:mod:`attnlab.pretrained.config_fields` lists the fields each family reads and those that change nothing).

Both the field names of transformers 5 (``rope_parameters``) and of the checkpoints written before it
(``rope_theta`` and ``rope_scaling`` at the top level) are read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attnlab.files import read_text
from attnlab.i18n import tr
from attnlab.layers.rotary import SCALING_TYPES, RopeScaling
from attnlab.models import GPTConfig, ModernDecoderConfig
from attnlab.pretrained.config_fields import refuse_unknown_fields

#: ``architectures`` entry -> the family its config is read as
SUPPORTED = {"GPT2LMHeadModel": "gpt2", "LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
             "MistralForCausalLM": "mistral", "Qwen3ForCausalLM": "qwen3", "Gemma2ForCausalLM": "gemma2",
             "Gemma3ForCausalLM": "gemma3", "Phi3ForCausalLM": "phi3", "DiffLlamaForCausalLM": "diffllama",
             "SmolLM3ForCausalLM": "smollm3", "Qwen3NextForCausalLM": "qwen3_next",
             "Qwen3_5ForCausalLM": "qwen3_5_text", "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text",
             "DeepseekV2ForCausalLM": "deepseek_v2",
             "DeepseekV3ForCausalLM": "deepseek_v3", "DeepseekV32ForCausalLM": "deepseek_v32",
             "Gemma4ForCausalLM": "gemma4_text",
             "KimiLinearForCausalLM": "kimi_linear"}
_GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def read_config_json(model_dir: Path) -> dict[str, Any]:
    path = model_dir / "config.json"
    if not path.is_file():
        raise FileNotFoundError(tr("{model_dir}: missing config.json (a Hugging Face model directory holds "
                                   "config.json, model.safetensors and tokenizer.json)", model_dir=model_dir))
    try:
        raw = json.loads(read_text(path, "model"))  # a FIFO, a directory, bytes not UTF-8: named
    except json.JSONDecodeError as e:
        raise ValueError(tr("{path}: not valid JSON ({e})", path=path, e=e)) from None
    if not isinstance(raw, dict):
        raise ValueError(tr("{path}: expected a JSON object, got {raw_type}", path=path, raw_type=type(raw).__name__))
    return raw


def architecture_of(raw: dict[str, Any], path: Path) -> str:
    """The one supported entry of ``architectures``; anything else is a ValueError naming what was found."""
    found = raw.get("architectures")
    if not isinstance(found, list) or len(found) != 1 or found[0] not in SUPPORTED:
        raise ValueError(tr("{path}: unsupported architecture {found!r} (model_type={model_type!r}); supported: "
                            "{supported}", path=path, found=found, model_type=raw.get("model_type"),
                            supported=", ".join(sorted(SUPPORTED))))
    return found[0]


def _need(raw: dict[str, Any], key: str, path: Path) -> Any:
    if raw.get(key) is None:
        raise ValueError(tr("{path}: missing field {key!r}", path=path, key=key))
    return raw[key]


def _refuse(path: Path, field: str, value: Any, why: str) -> ValueError:
    return ValueError(tr("{path}: cannot honour {field}={value!r}: {why}", path=path, field=field, value=value,
                         why=why))


def _build(cls: type, path: Path, **fields: Any) -> Any:
    """``cls(**fields)``, its own checks' errors prefixed with the file they came from."""
    try:
        return cls(**fields)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path}: {e}") from None


def gpt2_config(raw: dict[str, Any], path: Path) -> GPTConfig:
    act = raw.get("activation_function", "gelu_new")
    if act not in _GPT2_ACTIVATIONS:
        raise _refuse(path, "activation_function", act, tr("supported: {gpt2_activations}",
                                                           gpt2_activations=sorted(_GPT2_ACTIVATIONS)))
    for field, fine in (("scale_attn_weights", True), ("add_cross_attention", False)):
        if raw.get(field, fine) != fine:
            raise _refuse(path, field, raw[field], tr("attnlab's GPT computes GPT-2's attention ({field}={fine})",
                                                      field=field, fine=fine))
    d_model = _need(raw, "n_embd", path)
    return _build(GPTConfig, path, vocab_size=_need(raw, "vocab_size", path),
                  context_length=_need(raw, "n_positions", path), d_model=d_model,
                  num_layers=_need(raw, "n_layer", path), num_heads=_need(raw, "n_head", path),
                  d_ff=raw.get("n_inner") or 4 * d_model, qkv_bias=True, bias=True, activation=_GPT2_ACTIVATIONS[act],
                  layer_norm_eps=raw.get("layer_norm_epsilon", 1e-5),
                  tie_weights=bool(raw.get("tie_word_embeddings", True)),
                  scale_attn_by_inverse_layer_idx=bool(raw.get("scale_attn_by_inverse_layer_idx", False)))


def rope_of(raw: dict[str, Any], path: Path) -> tuple[float, dict[str, Any] | None]:
    """RoPE's base θ and scaling dict (:class:`RopeScaling` fields), from either generation of field names."""
    params = raw.get("rope_parameters")
    if params is None:  # checkpoints written before transformers 5
        params = {"rope_theta": raw.get("rope_theta", 10000.0), **(raw.get("rope_scaling") or {})}
    params = dict(params)
    kind = params.pop("rope_type", None) or params.pop("type", None) or "default"
    kind = "longrope" if kind == "su" else kind  # LongRoPE's first name, in Phi-3's early configs
    params.pop("type", None)
    base = params.pop("rope_theta", raw.get("rope_theta", 10000.0))
    partial = params.pop("partial_rotary_factor", raw.get("partial_rotary_factor", 1.0))
    if partial != 1.0:
        raise _refuse(path, "partial_rotary_factor", partial, tr("RoPE here turns every feature of a head"))
    if kind == "default":
        return base, None
    if kind not in SCALING_TYPES:
        raise _refuse(path, "rope type", kind, tr("supported: default, {scaling_types}",
                                                  scaling_types=', '.join(SCALING_TYPES)))
    if kind == "longrope":  # Phi-3: L₀ at the top level, and the stretch s = max_position_embeddings / L₀
        params.setdefault("original_max_position_embeddings", raw.get("original_max_position_embeddings")
                          or raw.get("max_position_embeddings"))
        params.setdefault("factor", raw.get("max_position_embeddings", 1) / params["original_max_position_embeddings"])
    original = params.get("original_max_position_embeddings", raw.get("max_position_embeddings"))
    if kind == "dynamic" and original != raw.get("max_position_embeddings"):  # here it stretches from the context
        raise _refuse(path, "original_max_position_embeddings", original,
                      tr("dynamic scaling here starts at max_position_embeddings"))
    if kind == "yarn":  # transformers' defaults: the pre-training length, and the factor that stretches it
        params = {k: v for k, v in params.items() if v is not None}
        params.setdefault("original_max_position_embeddings", original)
        params.setdefault("factor", _need(raw, "max_position_embeddings", path) / original)
    try:
        scaling = {"type": kind, **params}
        RopeScaling.from_dict(scaling)
    except (ValueError, TypeError) as e:
        raise _refuse(path, "rope scaling", {"rope_type": kind, **params}, str(e)) from None
    return base, scaling


def _within_context(raw: dict[str, Any], window: Any, path: Path) -> Any:
    """``window`` if it is no wider than ``max_position_embeddings``; wider is refused by name here, where the
    config's own check would speak of attnlab's ``context_length``."""
    n = raw.get("max_position_embeddings")
    if isinstance(window, int) and not isinstance(window, bool) and isinstance(n, int) and window > n:
        raise _refuse(path, "sliding_window", window, tr("a window is at most max_position_embeddings={n} wide here "
                                                         "(keys seen, its own included)", n=n))
    return window


def windows_of(family: str, raw: dict[str, Any], layers: int, path: Path) -> tuple[int | None, list[str] | None]:
    """``(sliding_window, layer_types)``: Mistral's and Phi-3's window on every layer (or none); Qwen2's and Qwen3's
    per-layer types (``max_window_layers`` full layers first, then sliding ones, unless listed)."""
    if family in ("mistral", "phi3"):
        return _within_context(raw, raw.get("sliding_window"), path), None
    if family not in ("qwen2", "qwen3"):
        return None, None
    window = raw.get("sliding_window") if raw.get("use_sliding_window") else None
    types = raw.get("layer_types") or [
        "sliding_attention" if window is not None and i >= raw.get("max_window_layers", layers) else "full_attention"
        for i in range(layers)]
    if set(types) == {"full_attention"}:
        return None, None
    window = _within_context(raw, _need(raw, "sliding_window", path), path)
    return window, None if set(types) == {"sliding_attention"} else list(types)


def _shapes(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """The sizes every Llama-like config names the same way."""
    heads = _need(raw, "num_attention_heads", path)
    return dict(vocab_size=_need(raw, "vocab_size", path), context_length=_need(raw, "max_position_embeddings", path),
                d_model=_need(raw, "hidden_size", path), num_layers=_need(raw, "num_hidden_layers", path),
                num_heads=heads, num_kv_heads=raw.get("num_key_value_heads") or heads, head_dim=raw.get("head_dim"),
                d_ff=_need(raw, "intermediate_size", path), norm_eps=raw.get("rms_norm_eps", 1e-6))


def llama_family_config(family: str, raw: dict[str, Any], path: Path) -> ModernDecoderConfig:
    """Llama, Qwen2, Mistral, Qwen3 and Phi-3 share one layout; they differ in biases, windows and QK-norm."""
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise _refuse(path, "hidden_act", act, tr("the SwiGLU feed-forward gates with SiLU"))
    attention_bias = bool(raw.get("attention_bias", False)) if family in ("llama", "qwen3") else False
    shapes = _shapes(raw, path)
    base, scaling = rope_of(raw, path)
    window, types = windows_of(family, raw, shapes["num_layers"], path)
    return _build(
        ModernDecoderConfig, path, **shapes, qkv_bias=family == "qwen2" or attention_bias, out_bias=attention_bias,
        rope_base=base, rope_scaling=scaling, sliding_window=window, layer_types=types,
        tie_weights=bool(raw.get("tie_word_embeddings", False)), mlp_bias=bool(raw.get("mlp_bias", False)),
        qk_norm="head" if family == "qwen3" else None,
    )


def _gemma_rope(raw: dict[str, Any], path: Path) -> tuple[float, dict[str, Any] | None, float | None]:
    """Gemma's RoPE: ``(base, scaling)`` of the global layers, and Gemma 3's base of the sliding ones (None: the
    same). transformers 5 keeps one ``rope_parameters`` per layer type; older files ``rope_local_base_freq``."""
    params = raw.get("rope_parameters")
    if isinstance(params, dict) and "full_attention" in params:
        base, scaling = rope_of({**raw, "rope_parameters": params["full_attention"]}, path)
        local = params.get("sliding_attention")
        if local is None:
            return base, scaling, None
        local_base, local_scaling = rope_of({**raw, "rope_parameters": local}, path)
        if local_scaling is not None:
            raise _refuse(path, "rope_parameters['sliding_attention']", local,
                          tr("the sliding layers' RoPE is unscaled here"))
        return base, scaling, local_base
    base, scaling = rope_of(raw, path)
    return base, scaling, raw.get("rope_local_base_freq")


def gemma_config(family: str, raw: dict[str, Any], path: Path) -> ModernDecoderConfig:
    """Gemma 2 and Gemma 3 (text): (1 + w) sandwich RMSNorms, GeGLU, √d embeddings, query_pre_attn_scalar,
    soft-capping, local and global layers (Gemma 3: QK-norm and a RoPE base per layer type)."""
    act = raw.get("hidden_activation") or raw.get("hidden_act") or "gelu_pytorch_tanh"
    if act != "gelu_pytorch_tanh":
        raise _refuse(path, "hidden_activation", act, tr("Gemma's feed-forward gates with GELU's tanh form "
                                                          "(gelu_pytorch_tanh)"))
    if raw.get("use_bidirectional_attention"):
        raise _refuse(path, "use_bidirectional_attention", raw["use_bidirectional_attention"],
                      tr("the decoder attends causally"))
    for field in ("attn_logit_softcapping", "final_logit_softcapping"):
        cap = raw.get(field)
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int | float) or not cap > 0):
            raise _refuse(path, field, cap, tr("a soft-cap cap · tanh(s / cap) needs cap > 0"))
    shapes = _shapes(raw, path)
    layers = shapes["num_layers"]
    pattern = 2 if family == "gemma2" else raw.get("sliding_window_pattern") or raw.get("_sliding_window_pattern", 6)
    types = raw.get("layer_types") or [
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
    base, scaling, local_base = _gemma_rope(raw, path)
    bias = bool(raw.get("attention_bias", False))
    return _build(
        ModernDecoderConfig, path, **shapes, qkv_bias=bias, out_bias=bias, rope_base=base, rope_scaling=scaling,
        rope_local_base=local_base, sliding_window=_within_context(raw, raw.get("sliding_window"), path),
        layer_types=list(types),
        tie_weights=bool(raw.get("tie_word_embeddings", True)), qk_norm="head" if family == "gemma3" else None,
        attn_softcap=raw.get("attn_logit_softcapping"), final_softcap=raw.get("final_logit_softcapping"),
        query_pre_attn_scalar=raw.get("query_pre_attn_scalar"), norm_unit_offset=True, sandwich_norm=True,
        activation="gelu_tanh", embed_scale=True,
    )


def read_decoder_config(model_dir: Path, readers: dict[str, Any] | None = None) -> tuple[str, Any]:
    """``(architecture, config)`` of a model directory's ``config.json``; ``readers``: family -> ``reader(raw, path)``
    for the families with a loader of their own (``pretrained/<family>.py``)."""
    raw = read_config_json(model_dir)
    path = model_dir / "config.json"
    arch = architecture_of(raw, path)
    family = SUPPORTED[arch]
    if readers and family in readers:
        return arch, readers[family](raw, path)
    refuse_unknown_fields(family, raw, path)
    if family == "gpt2":
        return arch, gpt2_config(raw, path)
    if family in ("gemma2", "gemma3"):
        return arch, gemma_config(family, raw, path)
    return arch, llama_family_config(family, raw, path)
