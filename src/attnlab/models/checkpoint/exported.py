"""One exported file: a model's weights as one safetensors file, with what loading it needs in its metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open
from safetensors.torch import save_model
from torch import nn

from attnlab.data.tokenizer import Tokenizer, tokenizer_from_json
from attnlab.files import atomic_write
from attnlab.i18n import tr
from attnlab.models.checkpoint.layout import FORMAT, check_vocabulary

#: the metadata keys of an exported file: what state.json and tokenizer.json say in a checkpoint directory
EXPORTED = ("attnlab", "tokenizer")


def export_weights(model: nn.Module, state: dict[str, Any], tokenizer: Tokenizer, out: str | Path) -> Path:
    """``model``'s weights as one safetensors file at ``out`` (written atomically), with what loading it needs in
    the file's metadata: the format, the architecture and the model config, and the tokenizer."""
    meta = {"format": FORMAT, "architecture": state.get("architecture", "gpt"), "model_config": state["model_config"]}
    metadata = dict(zip(EXPORTED, (json.dumps(meta), tokenizer.to_json()), strict=True))
    return atomic_write(out, lambda tmp: save_model(model, str(tmp), metadata=metadata))


def read_exported(path: Path) -> tuple[dict[str, Any], Tokenizer]:
    """``(state, tokenizer)`` from the metadata of a file of :func:`export_weights`; anything else is a ValueError
    naming the file."""
    try:
        with safe_open(str(path), "pt") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError) as err:
        raise ValueError(tr("checkpoint {path!r}: not a safetensors file ({err})", path=str(path), err=err)) from None
    if any(key not in metadata for key in EXPORTED):
        raise ValueError(tr("checkpoint {path!r}: a safetensors file without attnlab's metadata (architecture, model "
                            "config, tokenizer); write one with attnlab export", path=str(path)))
    try:
        state = json.loads(metadata["attnlab"])
    except json.JSONDecodeError as err:
        raise ValueError(tr("checkpoint {path!r}: its attnlab metadata is not JSON ({err})", path=str(path),
                            err=err)) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(tr("checkpoint {checkpoint!r}: unknown format {found!r}, expected {format}",
                            checkpoint=str(path), found=state.get("format") if isinstance(state, dict) else state,
                            format=FORMAT))
    tokenizer = tokenizer_from_json(metadata["tokenizer"], str(path))
    check_vocabulary(tokenizer, state.get("model_config", {}), path)
    return state, tokenizer
