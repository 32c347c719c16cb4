"""The checkpoint format, written and read in one place: everything needed to continue a run exactly, and to load
the model it trained, with no pickle anywhere.

Layout of an output directory::

    OUT/checkpoint.json              {"latest": "checkpoints/step_000500"}  (the pointer)
    OUT/checkpoints/step_000500/
        model.safetensors            the weights
        optimizer.safetensors        AdamW's moment tensors and step counters
        rng.safetensors              each process' torch RNG state
        state.json                   step, configs, loss history, optimizer scalars (lr, betas, ...)
        tokenizer.json               the tokenizer, as saved by attnlab.data
    OUT/loss.png                     the loss curve (drawn by the CLI and the demo, not here)

A checkpoint is written whole into a temporary directory and renamed into place; then the
pointer is replaced atomically (temp file + ``os.replace``). A crash at any moment leaves the
pointer on a complete checkpoint: the new one or the previous one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import Tensor, nn

from attnlab.data.tokenizer import Tokenizer, load_tokenizer
from attnlab.files import atomic_write_text, current_umask
from attnlab.i18n import tr
from attnlab.models.registry import Kind, architecture, build_model

POINTER = "checkpoint.json"
FORMAT = 3
#: format 1 named the sizes n_layers / n_heads; read such checkpoints with today's names
_RENAMED_IN_FORMAT_2 = {"n_layers": "num_layers", "n_heads": "num_heads"}


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
    """``state.json`` of a checkpoint directory, in today's format."""
    try:
        state = json.loads((checkpoint / "state.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(tr("checkpoint {checkpoint!r}: state.json is not valid JSON ({err}); the checkpoint is "
                            "damaged: use another one (an older one stays in checkpoints/) or train again",
                            checkpoint=str(checkpoint), err=err)) from None
    if state.get("format") in (1, 2):
        state["model_config"] = _upgraded(state["model_config"], state["format"])
        state["train_config"]["model"] = _upgraded(state["train_config"].get("model", {}), state["format"])
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


def checkpoint_kind(path: str | Path) -> Kind:
    """``"decoder"`` (a GPT or modern decoder) or ``"seq2seq"`` (an encoder-decoder) for the checkpoint at ``path``:
    the kind (:data:`~attnlab.models.registry.ARCHITECTURES`) of the architecture its ``state.json`` names."""
    return architecture(read_state(resolve_checkpoint(path)).get("architecture", "gpt")).kind


def load_trained(path: str | Path, device: str | torch.device = "cpu",
                 kind: Kind | None = None) -> tuple[nn.Module, Tokenizer]:
    """The model (eval mode) and tokenizer saved in ``path`` (an output or a checkpoint directory); the
    architecture is the one ``state.json`` records (GPT for checkpoints from before it was recorded).

    ``kind`` (``"decoder"`` or ``"seq2seq"``, see :mod:`attnlab.models.registry`): the kind of model the caller can
    use; a checkpoint of the other kind is a ValueError that says which command reads it.
    """
    if kind not in (None, "decoder", "seq2seq"):
        raise ValueError(tr("kind: expected 'decoder', 'seq2seq' or None, got {kind!r}", kind=kind))
    checkpoint = resolve_checkpoint(path)
    state = read_state(checkpoint)
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
    model = build_model(name, state["model_config"])
    load_weights(checkpoint, model)
    if not (checkpoint / "tokenizer.json").is_file():
        raise ValueError(tr("checkpoint {checkpoint!r}: tokenizer.json is missing; the checkpoint is incomplete",
                            checkpoint=str(checkpoint)))
    return model.to(device).eval(), load_tokenizer(checkpoint / "tokenizer.json")


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

    def load_weights(self, model: nn.Module) -> None:
        """Copy the saved weights into ``model``; a shape mismatch is a ValueError naming the tensors."""
        load_weights(self.path, model)


def optimizer_to_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Split ``optimizer.state_dict()`` into tensors (for safetensors) and JSON-able scalars."""
    sd = optimizer.state_dict()
    tensors, scalars = {}, {}
    for idx, slots in sd["state"].items():
        for name, value in slots.items():
            if isinstance(value, Tensor):
                tensors[f"state.{idx}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"state.{idx}.{name}"] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def optimizer_from_tensors(tensors: dict[str, Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    """Rebuild a state dict that ``optimizer.load_state_dict`` accepts from :func:`optimizer_to_tensors` output."""
    state: dict[int, dict[str, Any]] = {}
    for key, value in [*tensors.items(), *meta["scalars"].items()]:
        _, idx, name = key.split(".", 2)
        state.setdefault(int(idx), {})[name] = value
    groups = [{**g, "betas": tuple(g["betas"])} if "betas" in g else g for g in meta["param_groups"]]
    return {"state": state, "param_groups": groups}


def save_checkpoint(out_dir: str | Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
                    state: dict[str, Any], tokenizer: Tokenizer, rng: dict[str, Tensor], keep: int = 2) -> Path:
    """Write a checkpoint for ``step`` into ``out_dir`` and point ``checkpoint.json`` at it."""
    out_dir = Path(out_dir)
    root = out_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    name = f"step_{step:07d}"
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}."))
    try:
        save_model(model, str(tmp / "model.safetensors"))
        opt_tensors, opt_meta = optimizer_to_tensors(optimizer)
        save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
        save_file({k: v.contiguous() for k, v in rng.items()}, str(tmp / "rng.safetensors"))
        (tmp / "tokenizer.json").write_text(tokenizer.to_json(), encoding="utf-8")
        full = {"format": FORMAT, "step": step, **state, "optimizer": opt_meta}
        (tmp / "state.json").write_text(json.dumps(full, indent=1), encoding="utf-8")
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes 0700
        final = root / name
        if final.exists():  # the same step saved twice (e.g. Ctrl-C right after a save): keep the newest
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_text(out_dir / POINTER, json.dumps({"latest": f"checkpoints/{name}"}))
    _prune(root, keep, final)
    return final


def _prune(root: Path, keep: int, latest: Path) -> None:
    done = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step_"))
    for old in [p for p in done if p != latest][: max(0, len(done) - keep)]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob(".step_*"):  # temporaries left by a crash
        shutil.rmtree(stale, ignore_errors=True)


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read the checkpoint at ``path`` (an output directory or a checkpoint directory)."""
    ckpt = resolve_checkpoint(path)
    state = read_state(ckpt)
    optimizer = optimizer_from_tensors(load_file(ckpt / "optimizer.safetensors"), state.pop("optimizer"))
    rng = load_file(ckpt / "rng.safetensors")
    return Checkpoint(ckpt, state, optimizer, rng, load_tokenizer(ckpt / "tokenizer.json"))
