"""The model a run trains: its architecture's preset, the ``[model]`` overrides and what the data decides; and,
when resuming, the check that the checkpoint holds a model of that very shape."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from attnlab.i18n import tr
from attnlab.models import ARCHITECTURES
from attnlab.models.config import Presets
from attnlab.models.registry import architecture
from attnlab.training.config import TrainConfig, check_keys


def build_model_config(config: TrainConfig, vocab_size: int, **decided: Any) -> Any:
    """The arch's preset, with the ``[model]`` overrides, and what the data decides: the tokenizer's vocabulary size
    and any other field given in ``decided`` (a translation vocabulary's special ids); those may not be overridden."""
    row = architecture(config.arch)
    decided = {"vocab_size": vocab_size, **decided}
    check_keys(config.model, [f.name for f in dataclasses.fields(row.config) if f.name not in decided], "model")
    if config.preset not in row.presets:
        other = [a.name for a in ARCHITECTURES.values() if config.preset in a.presets]
        hint = f" (it is a preset of --arch {other[0]})" if other else ""
        raise ValueError(tr("preset: unknown preset {preset!r}{hint}; choose from {presets}", preset=config.preset,
                            hint=hint, presets=sorted(row.presets)))
    return row.config.from_preset(config.preset, **{**config.model, **decided})


def shape_differences(saved: dict, current: Presets) -> str:
    """The fields of the model config that differ from the saved one (dropout aside), as ``"name: checkpoint a,
    asked b, ..."``; empty when none does."""
    now = dataclasses.asdict(current)
    diff = {k: (saved.get(k), now[k]) for k in now if k != "dropout" and saved.get(k) != now[k]}
    return ", ".join(f"{k}: checkpoint {a!r}, asked {b!r}" for k, (a, b) in diff.items())


def check_same_shape(saved: dict, current: Presets, path: Path) -> None:
    """Resuming needs the very model that was saved: name every field that differs."""
    shown = shape_differences(saved, current)
    if shown:
        raise ValueError(tr("resume: the checkpoint in {path!r} is a model of a different shape ({shown})",
                            path=str(path), shown=shown))
