"""Writing a checkpoint: whole into a temporary directory, renamed into place, then the pointer moved to it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file, save_model
from torch import Tensor, nn

from attnlab.data.tokenizer import Tokenizer
from attnlab.files import atomic_write_text, current_umask
from attnlab.models.checkpoint.layout import FORMAT, POINTER
from attnlab.models.checkpoint.optimizer import optimizer_to_tensors


def save_checkpoint(out_dir: str | Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
                    state: dict[str, Any], tokenizer: Tokenizer, rng: dict[str, Tensor], keep: int = 2) -> Path:
    """Write a checkpoint for ``step`` into ``out_dir`` and point ``checkpoint.json`` at it."""
    root = Path(out_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{checkpoint_name(step)}."))
    try:
        save_model(model, str(tmp / "model.safetensors"))
        opt_tensors, opt_meta = optimizer_to_tensors(optimizer)
        save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return publish_checkpoint(out_dir, tmp, step, {**state, "optimizer": opt_meta}, tokenizer, rng, keep)


def checkpoint_name(step: int) -> str:
    """The directory of the checkpoint of ``step`` under ``OUT/checkpoints``."""
    return f"step_{step:07d}"


def publish_checkpoint(out_dir: str | Path, tmp: Path, step: int, state: dict[str, Any], tokenizer: Tokenizer,
                       rng: dict[str, Tensor], keep: int = 2) -> Path:
    """Complete the checkpoint whose weights are written in ``tmp`` (a hidden directory under ``OUT/checkpoints``):
    the RNG states, the tokenizer and ``state.json``; then rename it into place, point ``checkpoint.json`` at it
    and prune the older ones. Until the rename, the pointer stays on the previous checkpoint."""
    root = Path(out_dir) / "checkpoints"
    final = root / checkpoint_name(step)
    try:
        save_file({k: v.contiguous() for k, v in rng.items()}, str(tmp / "rng.safetensors"))
        (tmp / "tokenizer.json").write_text(tokenizer.to_json(), encoding="utf-8")
        full = {"format": FORMAT, "step": step, **state}
        (tmp / "state.json").write_text(json.dumps(full, indent=1), encoding="utf-8")
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes 0700
        if final.exists():  # the same step saved twice (e.g. Ctrl-C right after a save): keep the newest
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_text(Path(out_dir) / POINTER, json.dumps({"latest": f"checkpoints/{final.name}"}))
    _prune(root, keep, final)
    return final


def _prune(root: Path, keep: int, latest: Path) -> None:
    done = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step_"))
    for old in [p for p in done if p != latest][: max(0, len(done) - keep)]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob(".step_*"):  # temporaries left by a crash
        shutil.rmtree(stale, ignore_errors=True)
