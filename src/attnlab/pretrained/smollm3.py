"""SmolLM3 (``smollm3``): ``config.json`` -> a :class:`~attnlab.models.modern.smollm3.SmolLM3Config`; its tensors
have Llama's names.

Fields read, as transformers 5 writes them: the Llama-like sizes, ``rms_norm_eps``, ``rope_parameters`` (or the
older ``rope_theta`` / ``rope_scaling``; absent, SmolLM3's own base 2·10⁶), ``tie_word_embeddings``,
``attention_bias`` (on q, k, v and o), ``mlp_bias``; ``no_rope_layers`` (one flag per layer, 1 where the layer uses
RoPE; absent: every ``no_rope_layer_interval``-th layer without it); ``use_sliding_window``, ``sliding_window`` and
``layer_types`` (transformers puts the window on the NoPE layers only, and only with ``use_sliding_window``).
Refused by name: another ``hidden_act``, ``no_rope_layers`` of the wrong length or with flags other than 0 and 1,
``sliding_attention`` layers without ``use_sliding_window`` (transformers' mask would then narrow them and its
attention would not), and any field neither read nor known to change nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from attnlab.i18n import tr
from attnlab.models.modern.smollm3 import NOPE_INTERVAL, SmolLM3Config, every_fourth
from attnlab.pretrained.checkpoint_files import Expected
from attnlab.pretrained.config_fields import _LLAMA_LIKE, refuse_unknown_fields
from attnlab.pretrained.decoder_configs import _build, _refuse, _shapes, _within_context, rope_of
from attnlab.pretrained.decoder_weights import llama_layout

#: the checkpoints' ``model_type``, the key of this loader in causal_lm's table
FAMILY = "smollm3"
#: the fields the reader looks at
READ = _LLAMA_LIKE | {"attention_bias", "mlp_bias", "no_rope_layers", "no_rope_layer_interval", "use_sliding_window",
                      "layer_types"}
#: transformers' SmolLM3Config.default_theta: RoPE's base when the file names none
DEFAULT_BASE = 2000000.0


def nope_layers_of(raw: dict[str, Any], layers: int, path: Path) -> list[int]:
    """The indices of the layers without RoPE, from ``no_rope_layers`` (1 = uses RoPE) or its interval rule."""
    flags = raw.get("no_rope_layers")
    if flags is None:
        interval = raw.get("no_rope_layer_interval", NOPE_INTERVAL)
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise _refuse(path, "no_rope_layer_interval", interval, tr("an int >= 1"))
        return every_fourth(layers, interval)
    if not isinstance(flags, list) or len(flags) != layers or any(f not in (0, 1) or isinstance(f, float)
                                                                  for f in flags):
        raise _refuse(path, "no_rope_layers", flags, tr("one flag per layer ({layers}), 1 where the layer uses RoPE, "
                                                        "0 where it does not", layers=layers))
    return [i for i, uses_rope in enumerate(flags) if not uses_rope]


def read_config(raw: dict[str, Any], path: Path) -> SmolLM3Config:
    """A SmolLM3 ``config.json`` (``raw``, read from ``path``) -> its config."""
    refuse_unknown_fields(FAMILY, raw, path, READ)
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise _refuse(path, "hidden_act", act, tr("the SwiGLU feed-forward gates with SiLU"))
    shapes = _shapes(raw, path)
    nope = nope_layers_of(raw, shapes["num_layers"], path)
    windowed = bool(raw.get("use_sliding_window")) and raw.get("sliding_window") is not None
    types = raw.get("layer_types") or ["sliding_attention" if windowed and i in nope else "full_attention"
                                       for i in range(shapes["num_layers"])]
    if "sliding_attention" in types and not windowed:
        raise _refuse(path, "layer_types", types, tr("sliding_attention layers need use_sliding_window and a "
                                                     "sliding_window"))
    window = _within_context(raw, raw.get("sliding_window"), path) if "sliding_attention" in types else None
    base, scaling = rope_of({"rope_theta": DEFAULT_BASE, **raw}, path)
    bias = bool(raw.get("attention_bias", False))
    return _build(SmolLM3Config, path, **shapes, qkv_bias=bias, out_bias=bias, rope_base=base, rope_scaling=scaling,
                  sliding_window=window, layer_types=list(types) if window is not None else None,
                  tie_weights=bool(raw.get("tie_word_embeddings", True)), mlp_bias=bool(raw.get("mlp_bias", False)),
                  nope_layers=nope)


def layout(shapes: dict[str, torch.Size], config: SmolLM3Config) -> dict[str, Expected]:
    """SmolLM3's names -> ours: Llama's (a NoPE layer stores what any layer does)."""
    return llama_layout(shapes, config.num_layers, config.tie_weights)
