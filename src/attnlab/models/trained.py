"""A model that ``attnlab train`` (or ``attnlab train-seq2seq``) wrote: find its checkpoint, read its configuration,
load it with its tokenizer.

An output directory holds ``checkpoint.json`` (``{"latest": "checkpoints/step_000500"}``), which points at a
checkpoint directory with ``model.safetensors``, ``state.json`` (step, configs, history) and
``tokenizer.json``; the training side (optimizer, RNG, writing) lives in :mod:`attnlab.training.checkpoint`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model
from torch import nn

from attnlab.data.tokenizer import Tokenizer, load_tokenizer
from attnlab.files import json_field, read_json
from attnlab.i18n import tr
from attnlab.models.config import GPTConfig, ModernDecoderConfig
from attnlab.models.gpt import GPT
from attnlab.models.modern import ModernDecoder
from attnlab.models.transformer import Transformer, TransformerConfig

POINTER = "checkpoint.json"
FORMAT = 2
#: format 1 named the sizes n_layers / n_heads; read such checkpoints with today's names
_RENAMED_IN_FORMAT_2 = {"n_layers": "num_layers", "n_heads": "num_heads"}
#: what ``attnlab train --arch`` (and ``train-seq2seq``) builds: name -> (model class, config class); a
#: checkpoint's state.json names it under "architecture" (checkpoints from before the field are GPTs)
ARCHITECTURES: dict[str, tuple[type[nn.Module], type]] = {"gpt": (GPT, GPTConfig),
                                                          "modern": (ModernDecoder, ModernDecoderConfig),
                                                          "transformer": (Transformer, TransformerConfig)}
#: what a model of each architecture does: "decoder" continues text (``attnlab sample``), "seq2seq" translates
#: a source into a target (``attnlab translate``)
KINDS = {"gpt": "decoder", "modern": "decoder", "transformer": "seq2seq"}


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The checkpoint that ``out_dir/checkpoint.json`` points at, or None if there is none yet."""
    pointer = Path(out_dir) / POINTER
    if not pointer.exists():
        return None
    return Path(out_dir) / json_field(read_json(pointer, "checkpoint"), "latest", str, str(pointer))


def resolve_checkpoint(path: str | Path) -> Path:
    """An output directory (follow its pointer) or a checkpoint directory itself -> the checkpoint directory."""
    path = Path(path)
    if (path / "state.json").exists():
        return path
    latest = latest_checkpoint(path)
    if latest is None:
        raise ValueError(tr("checkpoint: no checkpoint found in {path!r} (expected {pointer} or state.json)",
                            path=str(path), pointer=POINTER))
    if not (latest / "state.json").exists():  # name what is missing: the pointer is there
        raise ValueError(tr("checkpoint: {pointer!r} points at {latest!r}, which {what}; the run is damaged (pass "
                            "one of its checkpoint directories, or train again)", pointer=str(path / POINTER),
                            latest=str(latest), what=tr("has no state.json") if latest.is_dir() else
                            tr("does not exist")))
    return latest


def _renamed(sizes: dict[str, Any]) -> dict[str, Any]:
    return {_RENAMED_IN_FORMAT_2.get(k, k): v for k, v in sizes.items()}


def read_state(checkpoint: Path) -> dict[str, Any]:
    """``state.json`` of a checkpoint directory, in today's format; a damaged one is a ValueError naming it."""
    where = str(checkpoint / "state.json")
    state = read_json(checkpoint / "state.json", "checkpoint")
    if state.get("format") == 1:
        state["model_config"] = _renamed(json_field(state, "model_config", dict, where))
        state["train_config"]["model"] = _renamed(json_field(state, "train_config", dict, where).get("model", {}))
        state["format"] = FORMAT
    if state.get("format") != FORMAT:
        raise ValueError(tr("checkpoint {checkpoint!r}: unknown format {found!r}, expected {format}",
                            checkpoint=str(checkpoint), found=state.get('format'), format=FORMAT))
    return state


def read_tensors(checkpoint: Path, name: str) -> dict[str, torch.Tensor]:
    """The tensors of the safetensors file ``name`` in a checkpoint directory; a ValueError names the file."""
    path = checkpoint / name
    try:
        if path.exists() and not path.is_file():  # a FIFO or a device would hang the reader
            raise OSError(tr("not a regular file"))
        return load_file(path)
    except (SafetensorError, OSError) as err:
        raise ValueError(tr("checkpoint {checkpoint!r}: {name} cannot be read ({err}); the file is missing, truncated "
                            "or corrupt", checkpoint=str(checkpoint), name=name, err=err)) from None


def load_weights(checkpoint: Path, model: nn.Module) -> None:
    """Copy the saved weights into ``model``; a shape mismatch is a ValueError naming the tensors."""
    saved = read_tensors(checkpoint, "model.safetensors")
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


def checkpoint_kind(path: str | Path) -> str:
    """``"decoder"`` (a GPT or modern decoder) or ``"seq2seq"`` (an encoder-decoder) for the checkpoint at ``path``."""
    architecture = read_state(resolve_checkpoint(path)).get("architecture", "gpt")
    if architecture not in KINDS:
        raise ValueError(tr("architecture: expected one of {choices}, got {architecture!r}",
                            choices=sorted(ARCHITECTURES), architecture=architecture))
    return KINDS[architecture]


def load_trained(path: str | Path, device: str | torch.device = "cpu",
                 kind: str | None = None) -> tuple[GPT | ModernDecoder | Transformer, Tokenizer]:
    """The model (eval mode) and tokenizer saved in ``path`` (an output or a checkpoint directory); the
    architecture is the one ``state.json`` records (GPT for checkpoints from before it was recorded).

    ``kind`` (``"decoder"`` or ``"seq2seq"``, see :data:`KINDS`): the kind of model the caller can use; a
    checkpoint of the other kind is a ValueError that says which command reads it.
    """
    if kind not in (None, "decoder", "seq2seq"):
        raise ValueError(tr("kind: expected 'decoder', 'seq2seq' or None, got {kind!r}", kind=kind))
    checkpoint = resolve_checkpoint(path)
    state = read_state(checkpoint)
    architecture = state.get("architecture", "gpt")
    if kind == "decoder" and KINDS.get(architecture) == "seq2seq":
        raise ValueError(tr("checkpoint {path!r} holds an encoder-decoder (translation) model, not a language model; "
                            "translate with it: attnlab translate --checkpoint {path}", path=str(path)))
    if kind == "seq2seq" and KINDS.get(architecture) == "decoder":
        raise ValueError(tr("checkpoint {path!r} holds a decoder-only language model ({architecture}), not an "
                            "encoder-decoder translation model; sample from it with attnlab sample --checkpoint "
                            "{path}, or train a translation model with attnlab train-seq2seq",
                            path=str(path), architecture=architecture))
    json_field(state, "model_config", dict, str(checkpoint / "state.json"))
    try:
        model = build_model(architecture, state["model_config"])
    except (ValueError, TypeError) as err:  # the file was edited or damaged: say which file
        raise ValueError(tr("checkpoint {checkpoint!r}: the model_config in state.json does not make a model ({err})",
                            checkpoint=str(checkpoint), err=err)) from None
    load_weights(checkpoint, model)
    return model.to(device).eval(), read_tokenizer(checkpoint, state["model_config"])


def read_tokenizer(checkpoint: Path, model_config: dict[str, Any]) -> Tokenizer:
    """The tokenizer saved beside the weights, which must be the one they were trained with (as many tokens)."""
    if not (checkpoint / "tokenizer.json").is_file():
        raise ValueError(tr("checkpoint {checkpoint!r}: tokenizer.json is missing; the checkpoint is incomplete",
                            checkpoint=str(checkpoint)))
    tokenizer = load_tokenizer(checkpoint / "tokenizer.json")
    expected = model_config.get("vocab_size")
    if expected is not None and tokenizer.vocab_size != expected:
        raise ValueError(tr("checkpoint {checkpoint!r}: tokenizer.json holds {found} tokens but the model was trained "
                            "on {expected}; the tokenizer does not belong to these weights", checkpoint=str(checkpoint),
                            found=tokenizer.vocab_size, expected=expected))
    return tokenizer
