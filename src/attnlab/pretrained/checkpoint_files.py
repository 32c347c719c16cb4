"""The tensors of a Hugging Face model directory: ``model.safetensors``, or shards listed in
``model.safetensors.index.json`` (``{"weight_map": {tensor name: file name}}``), read without pickle.

Each tensor goes through a table of the tensors the model expects (:class:`Expected`): its shape is checked
before it is read, and the error names the tensor and both shapes; a tensor the table does not know, and one
the table needs but the files lack, are errors too. A model is loaded whole or not at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor

from attnlab.i18n import tr

SINGLE, INDEX = "model.safetensors", "model.safetensors.index.json"


@dataclass(frozen=True)
class Expected:
    """One checkpoint tensor the model needs.

    Attributes:
        shape: its shape as the checkpoint stores it.
        convert: the checkpoint tensor -> our parameter(s), by name (a transpose, a split, or the tensor as it is).
        optional: may be absent (a tied head, which ``save_pretrained`` leaves out).
    """

    shape: tuple[int, ...]
    convert: Callable[[Tensor], dict[str, Tensor]]
    optional: bool = False


def shard_files(model_dir: Path) -> list[Path]:
    """The safetensors file(s) holding the weights: ``model.safetensors``, or every shard the index names."""
    single, index = model_dir / SINGLE, model_dir / INDEX
    if single.is_file():
        return [single]
    if not index.is_file():
        others = sorted(p.name for p in model_dir.glob("*.bin")) + sorted(p.name for p in model_dir.glob("*.pt"))
        hint = f" (found {others}: pickled weights are not read; save with safe_serialization)" if others else ""
        raise FileNotFoundError(tr("{model_dir}: missing {single} or {index}, the weights{hint}", model_dir=model_dir,
                                   single=SINGLE, index=INDEX, hint=hint))
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(tr("{index}: not a safetensors index (expected a 'weight_map' of tensor -> file): {e}",
                            index=index, e=e)) from None
    files = [model_dir / name for name in sorted(set(weight_map.values()))]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(tr("{index}: names shard(s) {missing} that are not in {model_dir}", index=index,
                                   missing=missing, model_dir=model_dir))
    return files


def read_tensors(model_dir: Path, expected: dict[str, Expected], ignored: re.Pattern[str],
                 dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """Every expected tensor of ``model_dir``, shape-checked, converted to our names and to ``dtype``.

    Args:
        model_dir: the model directory.
        expected: checkpoint tensor name -> :class:`Expected`.
        ignored: names that are stored but not weights (buffers such as GPT-2's causal mask).
        dtype: floating-point tensors are cast to it (checkpoints are often bfloat16).
    """
    state: dict[str, Tensor] = {}
    seen: set[str] = set()
    for path in shard_files(model_dir):
        try:
            with safe_open(str(path), framework="pt") as f:
                for name in f.keys():  # noqa: SIM118 (safe_open has no __iter__)
                    if ignored.search(name):
                        continue
                    if name not in expected:
                        raise ValueError(tr("{path}: unexpected tensor {name!r}: not part of the model that "
                                            "config.json describes (a different architecture, or more layers?)",
                                            path=path, name=name))
                    shape, want = tuple(f.get_slice(name).get_shape()), expected[name].shape
                    if shape != want:
                        raise ValueError(tr("{path}: tensor {name!r} has shape {shape}, but the model in config.json "
                                            "expects {want}", path=path, name=name, shape=shape, want=want))
                    tensor = f.get_tensor(name)
                    state.update(expected[name].convert(tensor.to(dtype) if tensor.is_floating_point() else tensor))
                    seen.add(name)
        except SafetensorError as e:
            raise ValueError(tr("{path}: not a valid safetensors file (truncated or corrupt?): {e}", path=path,
                                e=e)) from None
    missing = [name for name, e in expected.items() if name not in seen and not e.optional]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ValueError(tr("{model_dir}: missing tensor(s) {missing}{more} that the model in config.json needs",
                            model_dir=model_dir, missing=missing[:5], more=more))
    return state
