"""Reading a Hugging Face style BERT checkpoint: ``config.json`` -> :class:`EncoderConfig`, and
``model.safetensors`` tensor names -> our module names, with every shape checked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor

from attnlab.files import read_text
from attnlab.i18n import tr
from attnlab.models import EncoderConfig

SUPPORTED_MODEL_TYPES = ("bert",)
_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}

# Hugging Face BertModel name (after an optional "bert." prefix) -> ours
_EMBEDDINGS = {
    "embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight": "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm.weight": "embeddings.ln.weight",
    "embeddings.LayerNorm.bias": "embeddings.ln.bias",
}
_LAYER = {
    "attention.self.query": "attn.W_query",
    "attention.self.key": "attn.W_key",
    "attention.self.value": "attn.W_value",
    "attention.output.dense": "attn.out_proj",
    "attention.output.LayerNorm": "ln1",
    "intermediate.dense": "ff.linear1",
    "output.dense": "ff.linear2",
    "output.LayerNorm": "ln2",
}
_LAYER_RE = re.compile(r"encoder\.layer\.(\d+)\.(.+)\.(weight|bias|gamma|beta)$")
# a buffer some checkpoints store; everything outside embeddings./encoder. (the pooler, the
# pre-training or task heads: cls., classifier., qa_outputs., ...) is not part of the encoder either
_IGNORED = re.compile(r"^embeddings\.position_ids$")


def read_config(model_dir: Path) -> EncoderConfig:
    """``config.json`` of a BERT-family model -> :class:`EncoderConfig` (clear errors for others)."""
    path = model_dir / "config.json"
    if not path.is_file():
        raise FileNotFoundError(tr("{model_dir}: missing config.json (a Hugging Face style model directory needs "
                                   "config.json, model.safetensors and tokenizer.json or vocab.txt)",
                                   model_dir=model_dir))
    try:
        raw: dict[str, Any] = json.loads(read_text(path, "model"))
    except json.JSONDecodeError as e:
        raise ValueError(tr("{path}: not valid JSON ({e})", path=path, e=e)) from None
    model_type = raw.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            tr("{path}: unsupported architecture model_type={model_type!r} (architectures={architectures}); supported: "
               "{supported_model_types}", path=path, model_type=model_type, architectures=raw.get('architectures'),
               supported_model_types=SUPPORTED_MODEL_TYPES)
        )
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(tr("{path}: unsupported position_embedding_type={raw!r}; only 'absolute' is supported",
                            path=path, raw=raw['position_embedding_type']))
    act = raw.get("hidden_act", "gelu")
    if act not in _ACTIVATIONS:
        raise ValueError(tr("{path}: unsupported hidden_act={act!r}; supported: {activations}", path=path, act=act,
                            activations=sorted(_ACTIVATIONS)))
    try:
        return EncoderConfig(
            vocab_size=raw["vocab_size"], context_length=raw["max_position_embeddings"], d_model=raw["hidden_size"],
            num_layers=raw["num_hidden_layers"], num_heads=raw["num_attention_heads"], d_ff=raw["intermediate_size"],
            type_vocab_size=raw.get("type_vocab_size", 2), activation=_ACTIVATIONS[act],
            layer_norm_eps=raw.get("layer_norm_eps", 1e-12), pad_id=raw.get("pad_token_id") or 0,
        )
    except KeyError as e:
        raise ValueError(tr("{path}: missing field {args!r}", path=path, args=e.args[0])) from None


def our_name(hf_name: str) -> str | None:
    """Our parameter name for a checkpoint tensor name; None for tensors the encoder does not use."""
    name = hf_name.removeprefix("bert.")
    if _IGNORED.match(name) or not name.startswith(("embeddings.", "encoder.")):
        return None
    if name in _EMBEDDINGS:
        return _EMBEDDINGS[name]
    m = _LAYER_RE.match(name)
    if m and m.group(2) in _LAYER:
        suffix = {"gamma": "weight", "beta": "bias"}.get(m.group(3), m.group(3))  # old TF-era names
        return f"blocks.{m.group(1)}.{_LAYER[m.group(2)]}.{suffix}"
    if name.replace("gamma", "weight").replace("beta", "bias") in _EMBEDDINGS:
        return _EMBEDDINGS[name.replace("gamma", "weight").replace("beta", "bias")]
    raise ValueError(tr("unexpected tensor {hf_name!r} in the checkpoint: not part of a BERT encoder", hf_name=hf_name))


def read_weights(path: Path, expected: dict[str, torch.Size]) -> dict[str, Tensor]:
    """Read ``model.safetensors`` into our names, checking every shape against ``expected``."""
    if not path.is_file():
        raise FileNotFoundError(tr("{parent}: missing {name} (the weights; only safetensors are read)",
                                   parent=path.parent, name=path.name))
    state: dict[str, Tensor] = {}
    try:
        with safe_open(str(path), framework="pt") as f:
            for hf_name in f.keys():  # noqa: SIM118 (safe_open has no __iter__)
                name = our_name(hf_name)
                if name is None:
                    continue
                shape = tuple(f.get_slice(hf_name).get_shape())
                if name in expected and shape != tuple(expected[name]):
                    raise ValueError(tr("{path}: tensor {hf_name!r} has shape {shape}, but the model in config.json "
                                        "expects {expected} (for {name})", path=path, hf_name=hf_name, shape=shape,
                                        expected=tuple(expected[name]), name=name))
                state[name] = f.get_tensor(hf_name)
    except SafetensorError as e:
        raise ValueError(tr("{path}: not a valid safetensors file (truncated or corrupt?): {e}", path=path,
                            e=e)) from None
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ValueError(tr("{path}: missing tensor(s) for {missing}{value}", path=path, missing=missing[:5],
                            value=' ...' if len(missing) > 5 else ''))
    return state
