"""``config.json`` of a Hugging Face causal language model -> an attnlab config, refusing what it cannot honour.

A field that would change what the model computes, and that attnlab's model does not implement (an unknown RoPE
scaling, a partial rotary dimension, biases where the model has none, mixed full and sliding-window layers), is a
ValueError naming the field and its value: never a model that loads and computes something else.

Both the field names of transformers 5 (``rope_parameters``) and of the checkpoints written before it
(``rope_theta`` and ``rope_scaling`` at the top level) are read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attnlab.i18n import tr
from attnlab.layers.rotary import SCALING_TYPES, RopeScaling
from attnlab.models import GPTConfig, ModernDecoderConfig

#: ``architectures`` entry -> the family its config is read as
SUPPORTED = {"GPT2LMHeadModel": "gpt2", "LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
             "MistralForCausalLM": "mistral"}
_GPT2_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def read_config_json(model_dir: Path) -> dict[str, Any]:
    path = model_dir / "config.json"
    if not path.is_file():
        raise FileNotFoundError(tr("{model_dir}: missing config.json (a Hugging Face model directory holds "
                                   "config.json, model.safetensors and tokenizer.json)", model_dir=model_dir))
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
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
    for field, fine in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                        ("add_cross_attention", False)):
        if raw.get(field, fine) != fine:
            raise _refuse(path, field, raw[field], tr("attnlab's GPT computes GPT-2's attention ({field}={fine})",
                                                      field=field, fine=fine))
    d_model = _need(raw, "n_embd", path)
    return _build(GPTConfig, path, vocab_size=_need(raw, "vocab_size", path),
                  context_length=_need(raw, "n_positions", path), d_model=d_model,
                  num_layers=_need(raw, "n_layer", path), num_heads=_need(raw, "n_head", path),
                  d_ff=raw.get("n_inner") or 4 * d_model, qkv_bias=True, bias=True, activation=_GPT2_ACTIVATIONS[act],
                  layer_norm_eps=raw.get("layer_norm_epsilon", 1e-5),
                  tie_weights=bool(raw.get("tie_word_embeddings", True)))


def rope_of(raw: dict[str, Any], path: Path) -> tuple[float, dict[str, Any] | None]:
    """RoPE's base θ and scaling dict (:class:`RopeScaling` fields), from either generation of field names."""
    params = raw.get("rope_parameters")
    if params is None:  # checkpoints written before transformers 5
        params = {"rope_theta": raw.get("rope_theta", 10000.0), **(raw.get("rope_scaling") or {})}
    params = dict(params)
    kind = params.pop("rope_type", None) or params.pop("type", None) or "default"
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
    original = params.get("original_max_position_embeddings", raw.get("max_position_embeddings"))
    if kind == "dynamic" and original != raw.get("max_position_embeddings"):  # here it stretches from the context
        raise _refuse(path, "original_max_position_embeddings", original,
                      tr("dynamic scaling here starts at max_position_embeddings"))
    if kind == "yarn":  # transformers' defaults: the pre-training length, and the factor that stretches it
        params = {k: v for k, v in params.items() if v is not None}
        params.setdefault("original_max_position_embeddings", original)
        params.setdefault("factor", raw.get("max_position_embeddings") / original)
    try:
        scaling = {"type": kind, **params}
        RopeScaling.from_dict(scaling)
    except (ValueError, TypeError) as e:
        raise _refuse(path, "rope scaling", {"rope_type": kind, **params}, str(e)) from None
    return base, scaling


def sliding_window_of(family: str, raw: dict[str, Any], layers: int, path: Path) -> int | None:
    """Mistral's window (every layer, or none); Qwen2's per-layer types, which must be all alike."""
    if family == "mistral":
        return raw.get("sliding_window")
    if family != "qwen2":
        return None
    window = raw.get("sliding_window") if raw.get("use_sliding_window") else None
    types = raw.get("layer_types") or [
        "sliding_attention" if window is not None and i >= raw.get("max_window_layers", layers) else "full_attention"
        for i in range(layers)]
    if set(types) == {"full_attention"}:
        return None
    if set(types) == {"sliding_attention"}:
        return _need(raw, "sliding_window", path)
    raise _refuse(path, "layer_types", types, tr("every layer attends alike here (all full, or all sliding_attention)"))


def llama_family_config(family: str, raw: dict[str, Any], path: Path) -> ModernDecoderConfig:
    """Llama, Qwen2 and Mistral share one layout; they differ in biases and windows."""
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise _refuse(path, "hidden_act", act, tr("the SwiGLU feed-forward gates with SiLU"))
    if raw.get("mlp_bias"):
        raise _refuse(path, "mlp_bias", raw["mlp_bias"], tr("the SwiGLU feed-forward has no biases"))
    attention_bias = bool(raw.get("attention_bias", False)) if family == "llama" else False
    layers, heads, d_model = (_need(raw, k, path) for k in ("num_hidden_layers", "num_attention_heads",
                                                            "hidden_size"))
    base, scaling = rope_of(raw, path)
    return _build(
        ModernDecoderConfig, path, vocab_size=_need(raw, "vocab_size", path),
        context_length=_need(raw, "max_position_embeddings", path), d_model=d_model, num_layers=layers,
        num_heads=heads, num_kv_heads=raw.get("num_key_value_heads") or heads,
        head_dim=raw.get("head_dim"), d_ff=_need(raw, "intermediate_size", path),
        qkv_bias=family == "qwen2" or attention_bias, out_bias=attention_bias, rope_base=base,
        rope_scaling=scaling, sliding_window=sliding_window_of(family, raw, layers, path),
        norm_eps=raw.get("rms_norm_eps", 1e-6), tie_weights=bool(raw.get("tie_word_embeddings", False)),
    )


def read_decoder_config(model_dir: Path) -> tuple[str, GPTConfig | ModernDecoderConfig]:
    """``(architecture, config)`` of a model directory's ``config.json``."""
    raw = read_config_json(model_dir)
    path = model_dir / "config.json"
    arch = architecture_of(raw, path)
    family = SUPPORTED[arch]
    return arch, gpt2_config(raw, path) if family == "gpt2" else llama_family_config(family, raw, path)
