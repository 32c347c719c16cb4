"""Reading a checkpoint: the directory a run wrote (:mod:`attnlab.models.checkpoint`) back into a model, its
tokenizer, and everything needed to continue the run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model
from torch import Tensor, nn

from attnlab.data.tokenizer import Tokenizer, load_tokenizer
from attnlab.files import json_field, read_json
from attnlab.i18n import tr
from attnlab.models.checkpoint.exported import read_exported
from attnlab.models.checkpoint.layout import FORMAT, POINTER, check_vocabulary
from attnlab.models.checkpoint.optimizer import optimizer_from_tensors
from attnlab.models.registry import Kind, architecture, build_model

if TYPE_CHECKING:
    from attnlab.models.language_model import LanguageModel
    from attnlab.models.transformer import Transformer

#: format 1 named the sizes n_layers / n_heads; read such checkpoints with today's names
_RENAMED_IN_FORMAT_2 = {"n_layers": "num_layers", "n_heads": "num_heads"}


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


def _upgraded(fields: dict[str, Any], found: int) -> dict[str, Any]:
    """A model config's fields as a checkpoint of format ``found`` saved them, in today's names: format 1 said
    n_layers / n_heads; format 2 said ``norm_first`` (True / False) where today's says ``norm`` ("pre" / "post")."""
    if found < 2:
        fields = {_RENAMED_IN_FORMAT_2.get(k, k): v for k, v in fields.items()}
    if found < 3 and "norm_first" in fields:
        fields = {k: v for k, v in fields.items() if k != "norm_first"} | {"norm": "pre" if fields["norm_first"]
                                                                            else "post"}
    return fields


def read_state(checkpoint: Path) -> dict[str, Any]:
    """``state.json`` of a checkpoint directory, in today's format; a damaged one is a ValueError naming it."""
    where = str(checkpoint / "state.json")
    state = read_json(checkpoint / "state.json", "checkpoint")
    if state.get("format") in (1, 2):
        found = state["format"]
        state["model_config"] = _upgraded(json_field(state, "model_config", dict, where), found)
        train_config = json_field(state, "train_config", dict, where)
        train_config["model"] = _upgraded(train_config.get("model", {}), found)
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
    load_weights_file(checkpoint / "model.safetensors", model, str(checkpoint))


def load_weights_file(path: Path, model: nn.Module, where: str) -> None:
    """Copy the weights of the safetensors file ``path`` into ``model``; a shape mismatch is a ValueError naming the
    tensors and ``where`` (the checkpoint)."""
    saved = read_tensors(path.parent, path.name)
    own = model.state_dict()
    bad = [f"{k}: checkpoint {tuple(v.shape)}, model {tuple(own[k].shape)}"
           for k, v in saved.items() if k in own and own[k].shape != v.shape]
    if bad:
        raise ValueError(tr("checkpoint {checkpoint!r} holds a model of a different shape: {differences}",
                            checkpoint=where, differences="; ".join(bad[:5])))
    missing, unexpected = load_model(model, path, strict=False)
    if missing or unexpected:
        raise ValueError(tr("checkpoint {checkpoint!r} does not match the model: missing {missing}, unexpected "
                            "{unexpected}", checkpoint=where, missing=sorted(missing)[:5],
                            unexpected=sorted(unexpected)[:5]))


def checkpoint_kind(path: str | Path) -> Kind:
    """``"decoder"`` (a GPT or modern decoder) or ``"seq2seq"`` (an encoder-decoder) for the checkpoint at ``path``:
    the kind (:data:`~attnlab.models.registry.ARCHITECTURES`) of the architecture its ``state.json`` names."""
    return architecture(read_state(resolve_checkpoint(path)).get("architecture", "gpt")).kind


@overload
def load_trained(path: str | Path, device: str | torch.device = "cpu", *,
                 kind: Literal["decoder"]) -> tuple[LanguageModel, Tokenizer]: ...
@overload
def load_trained(path: str | Path, device: str | torch.device = "cpu", *,
                 kind: Literal["seq2seq"]) -> tuple[Transformer, Tokenizer]: ...
@overload
def load_trained(path: str | Path, device: str | torch.device = "cpu",
                 kind: Kind | None = None) -> tuple[nn.Module, Tokenizer]: ...
def load_trained(path: str | Path, device: str | torch.device = "cpu",
                 kind: Kind | None = None) -> tuple[nn.Module, Tokenizer]:
    """The model (eval mode) and tokenizer saved in ``path`` (an output or a checkpoint directory, or the one
    safetensors file of ``attnlab export``); the architecture is the one ``state.json`` records (GPT for checkpoints
    from before it was recorded).

    ``kind`` (``"decoder"`` or ``"seq2seq"``, see :mod:`attnlab.models.registry`): the kind of model the caller can
    use; a checkpoint of the other kind is a ValueError that says which command reads it.
    """
    if kind not in (None, "decoder", "seq2seq"):
        raise ValueError(tr("kind: expected 'decoder', 'seq2seq' or None, got {kind!r}", kind=kind))
    if Path(path).is_file():
        state, tokenizer = read_exported(Path(path))
        model = model_of(state, path, kind, str(path))
        load_weights_file(Path(path), model, str(path))
        return model.to(device).eval(), tokenizer
    checkpoint = resolve_checkpoint(path)
    state = read_state(checkpoint)
    if state.get("sharded"):
        raise ValueError(tr("checkpoint {checkpoint!r} is sharded (written by {n} processes); make it one file first: "
                            "attnlab export --checkpoint {checkpoint} --out model.safetensors",
                            checkpoint=str(checkpoint), n=state.get("world_size", "?")))
    model = model_of(state, path, kind, str(checkpoint / "state.json"))
    load_weights(checkpoint, model)
    return model.to(device).eval(), read_tokenizer(checkpoint, state["model_config"])


def model_of(state: dict[str, Any], path: str | Path, kind: Kind | None, where: str) -> nn.Module:
    """A fresh model of the architecture and ``model_config`` that ``state`` records (read from ``where``), which
    must be of ``kind`` (see :func:`load_trained`)."""
    name = state.get("architecture", "gpt")
    found = architecture(name).kind
    if kind == "decoder" and found == "seq2seq":
        raise ValueError(tr("checkpoint {path!r} holds an encoder-decoder (translation) model, not a language model; "
                            "translate with it: attnlab translate --checkpoint {path}", path=str(path)))
    if kind == "seq2seq" and found == "decoder":
        raise ValueError(tr("checkpoint {path!r} holds a decoder-only language model ({architecture}), not an "
                            "encoder-decoder translation model; sample from it with attnlab sample --checkpoint "
                            "{path}, or train a translation model with attnlab train-seq2seq",
                            path=str(path), architecture=name))
    json_field(state, "model_config", dict, where)
    try:
        return build_model(name, state["model_config"])
    except (ValueError, TypeError) as err:  # the file was edited or damaged: say which file
        raise ValueError(tr("checkpoint {checkpoint!r}: the model_config in state.json does not make a model ({err})",
                            checkpoint=where, err=err)) from None


def read_tokenizer(checkpoint: Path, model_config: dict[str, Any]) -> Tokenizer:
    """The tokenizer saved beside the weights, which must be the one they were trained with (as many tokens)."""
    if not (checkpoint / "tokenizer.json").is_file():
        raise ValueError(tr("checkpoint {checkpoint!r}: tokenizer.json is missing; the checkpoint is incomplete",
                            checkpoint=str(checkpoint)))
    tokenizer = load_tokenizer(checkpoint / "tokenizer.json")
    check_vocabulary(tokenizer, model_config, checkpoint)
    return tokenizer


@dataclass
class Checkpoint:
    """A checkpoint read back from disk (tensors on the CPU)."""

    path: Path
    state: dict[str, Any]
    optimizer: dict[str, Any]
    rng: dict[str, Tensor]
    tokenizer: Tokenizer

    @property
    def step(self) -> int:
        return self.state["step"]

    @property
    def sharded(self) -> bool:
        """Written in pieces by every process (see :data:`SHARDED`)."""
        return bool(self.state.get("sharded"))

    def check_trainer_state(self) -> None:
        """What a trainer saves beside the weights (its config, the model's, the loss history) is all there."""
        where = str(self.path / "state.json")
        for key, kind in (("train_config", dict), ("model_config", dict), ("history", dict)):
            json_field(self.state, key, kind, where)
        for key in ("train", "eval"):
            json_field(self.state["history"], key, list, f"{where} (history)")

    def load_weights(self, model: nn.Module) -> None:
        """Copy the saved weights into ``model``; a shape mismatch is a ValueError naming the tensors."""
        load_weights(self.path, model)

    def load_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Restore the saved optimizer state into ``optimizer``, checked first against its parameters: torch
        would accept moments of the wrong shape and fail (or silently broadcast) at the next step."""
        self.check_optimizer(optimizer)
        try:
            optimizer.load_state_dict(self.optimizer)
        except (ValueError, KeyError, TypeError, RuntimeError) as err:
            raise ValueError(tr("{where}: the optimizer state cannot be restored ({err}); the file is damaged",
                                where=str(self.path / "optimizer.safetensors"), err=err)) from None

    def check_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """The saved optimizer state fits ``optimizer``: as many parameters in each group, moments of each
        parameter's (global) shape."""
        where = str(self.path / "optimizer.safetensors")
        params = [p for group in optimizer.param_groups for p in group["params"]]
        saved = [len(group.get("params", ())) for group in self.optimizer["param_groups"]]
        if saved != [len(group["params"]) for group in optimizer.param_groups]:
            raise ValueError(tr("{where}: the optimizer state is for parameter groups of sizes {saved}, the model has "
                                "{found}; the file is damaged or belongs to another model", where=where, saved=saved,
                                found=[len(group["params"]) for group in optimizer.param_groups]))
        for idx, slots in self.optimizer["state"].items():
            if not 0 <= idx < len(params):
                raise ValueError(tr("{where}: the optimizer state names parameter {idx}, the model has {n}; the file "
                                    "is damaged or belongs to another model", where=where, idx=idx, n=len(params)))
            for name, value in slots.items():
                if isinstance(value, Tensor) and name != "step" and value.shape != params[idx].shape:
                    raise ValueError(tr("{where}: the optimizer's {name} for parameter {idx} has shape {shape} but the "
                                        "parameter has shape {expected}; the file is damaged or belongs to another "
                                        "model", where=where, name=name, idx=idx, shape=tuple(value.shape),
                                        expected=tuple(params[idx].shape)))


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read the checkpoint at ``path`` (an output directory or a checkpoint directory); every file is checked, and
    a missing or damaged one is a ValueError that names it."""
    ckpt = resolve_checkpoint(path)
    state = read_state(ckpt)
    where = str(ckpt / "state.json")
    json_field(state, "step", int, where)
    if state.get("sharded"):  # the weights and the optimizer state are in SHARDED: read by attnlab.training
        optimizer = {}
    else:
        json_field(state, "optimizer", dict, where)
        optimizer = optimizer_from_tensors(read_tensors(ckpt, "optimizer.safetensors"), state.pop("optimizer"),
                                           where)
    rng = read_tensors(ckpt, "rng.safetensors")
    for key, value in rng.items():
        if value.dtype != torch.uint8 or value.dim() != 1:
            raise ValueError(tr("checkpoint {checkpoint!r}: rng.safetensors holds {key!r} of {dtype} {shape}, "
                                "expected a uint8 vector (an RNG state); the file is damaged", checkpoint=str(ckpt),
                                key=key, dtype=value.dtype, shape=tuple(value.shape)))
    return Checkpoint(ckpt, state, optimizer, rng, read_tokenizer(ckpt, state.get("model_config", {})))
