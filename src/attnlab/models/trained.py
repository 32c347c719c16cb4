"""A model that ``attnlab train`` wrote: find its checkpoint, read its configuration, load it with its tokenizer.

An output directory holds ``checkpoint.json`` (``{"latest": "checkpoints/step_000500"}``), which points at a
checkpoint directory with ``model.safetensors``, ``state.json`` (step, configs, history) and
``tokenizer.json``; the training side (optimizer, RNG, writing) lives in :mod:`attnlab.training.checkpoint`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model
from torch import nn

from attnlab.data.tokenizer import Tokenizer, load_tokenizer
from attnlab.i18n import tr
from attnlab.models.config import GPTConfig, ModernDecoderConfig
from attnlab.models.gpt import GPT
from attnlab.models.modern import ModernDecoder

POINTER = "checkpoint.json"
FORMAT = 2
#: format 1 named the sizes n_layers / n_heads; read such checkpoints with today's names
_RENAMED_IN_FORMAT_2 = {"n_layers": "num_layers", "n_heads": "num_heads"}
#: what ``attnlab train --arch`` builds: name -> (model class, config class); a checkpoint's state.json names it
#: under "architecture" (checkpoints from before the field are GPTs)
ARCHITECTURES: dict[str, tuple[type[nn.Module], type]] = {"gpt": (GPT, GPTConfig),
                                                          "modern": (ModernDecoder, ModernDecoderConfig)}


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The checkpoint that ``out_dir/checkpoint.json`` points at, or None if there is none yet."""
    pointer = Path(out_dir) / POINTER
    if not pointer.exists():
        return None
    return Path(out_dir) / json.loads(pointer.read_text(encoding="utf-8"))["latest"]


def resolve_checkpoint(path: str | Path) -> Path:
    """An output directory (follow its pointer) or a checkpoint directory itself -> the checkpoint directory."""
    path = Path(path)
    if (path / "state.json").exists():
        return path
    latest = latest_checkpoint(path)
    if latest is None or not (latest / "state.json").exists():
        raise ValueError(tr("checkpoint: no checkpoint found in {path!r} (expected {pointer} or state.json)",
                            path=str(path), pointer=POINTER))
    return latest


def _renamed(sizes: dict[str, Any]) -> dict[str, Any]:
    return {_RENAMED_IN_FORMAT_2.get(k, k): v for k, v in sizes.items()}


def read_state(checkpoint: Path) -> dict[str, Any]:
    """``state.json`` of a checkpoint directory, in today's format."""
    try:
        state = json.loads((checkpoint / "state.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(tr("checkpoint {checkpoint!r}: state.json is not valid JSON ({err}); the checkpoint is "
                            "damaged: use another one (an older one stays in checkpoints/) or train again",
                            checkpoint=str(checkpoint), err=err)) from None
    if state.get("format") == 1:
        state["model_config"] = _renamed(state["model_config"])
        state["train_config"]["model"] = _renamed(state["train_config"].get("model", {}))
        state["format"] = FORMAT
    if state.get("format") != FORMAT:
        raise ValueError(tr("checkpoint {checkpoint!r}: unknown format {found!r}, expected {format}",
                            checkpoint=str(checkpoint), found=state.get('format'), format=FORMAT))
    return state


def load_weights(checkpoint: Path, model: nn.Module) -> None:
    """Copy the saved weights into ``model``; a shape mismatch is a ValueError naming the tensors."""
    try:
        saved = load_file(checkpoint / "model.safetensors")
    except (SafetensorError, OSError) as err:
        raise ValueError(tr("checkpoint {checkpoint!r}: model.safetensors cannot be read ({err}); the file is "
                            "missing, truncated or corrupt", checkpoint=str(checkpoint), err=err)) from None
    own = model.state_dict()
    bad = [f"{k}: checkpoint {tuple(v.shape)}, model {tuple(own[k].shape)}"
           for k, v in saved.items() if k in own and own[k].shape != v.shape]
    if bad:
        raise ValueError(tr("checkpoint {checkpoint!r} holds a model of a different shape: {differences}",
                            checkpoint=str(checkpoint), differences="; ".join(bad[:5])))
    missing, unexpected = load_model(model, checkpoint / "model.safetensors", strict=False)
    if missing or unexpected:
        raise ValueError(tr("checkpoint {checkpoint!r} does not match the model: missing {missing}, unexpected "
                            "{unexpected}", checkpoint=str(checkpoint), missing=sorted(missing)[:5],
                            unexpected=sorted(unexpected)[:5]))


def build_model(architecture: str, model_config: dict[str, Any]) -> nn.Module:
    """A fresh model of ``architecture`` (a key of :data:`ARCHITECTURES`) from its config's fields."""
    if architecture not in ARCHITECTURES:
        raise ValueError(tr("architecture: expected one of {architectures}, got {architecture!r}",
                            architectures=sorted(ARCHITECTURES), architecture=architecture))
    model_cls, config_cls = ARCHITECTURES[architecture]
    return model_cls(config_cls(**model_config))


def load_trained(path: str | Path, device: str | torch.device = "cpu") -> tuple[GPT | ModernDecoder, Tokenizer]:
    """The model (eval mode) and tokenizer saved in ``path`` (an output or a checkpoint directory); the
    architecture is the one ``state.json`` records (GPT for checkpoints from before it was recorded)."""
    checkpoint = resolve_checkpoint(path)
    state = read_state(checkpoint)
    model = build_model(state.get("architecture", "gpt"), state["model_config"])
    load_weights(checkpoint, model)
    if not (checkpoint / "tokenizer.json").is_file():
        raise ValueError(tr("checkpoint {checkpoint!r}: tokenizer.json is missing; the checkpoint is incomplete",
                            checkpoint=str(checkpoint)))
    return model.to(device).eval(), load_tokenizer(checkpoint / "tokenizer.json")
