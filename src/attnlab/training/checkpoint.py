"""Checkpoints: everything needed to continue a run exactly, with no pickle anywhere.

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
from safetensors.torch import load_file, save_file, save_model
from torch import Tensor, nn

from attnlab.data.tokenizer import Tokenizer, load_tokenizer
from attnlab.files import atomic_write_text, current_umask
from attnlab.models.trained import FORMAT, POINTER, latest_checkpoint, load_weights, read_state, resolve_checkpoint

__all__ = ["POINTER", "Checkpoint", "latest_checkpoint", "load_checkpoint", "resolve_checkpoint", "save_checkpoint"]


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
