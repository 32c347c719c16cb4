"""The optimizer's state in a checkpoint: its tensors to safetensors, its scalars to JSON, and back."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnlab.i18n import tr


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


def optimizer_from_tensors(tensors: dict[str, Tensor], meta: dict[str, Any],
                           where: str = "optimizer state") -> dict[str, Any]:
    """Rebuild a state dict that ``optimizer.load_state_dict`` accepts from :func:`optimizer_to_tensors` output;
    keys or fields of another layout are a ValueError naming ``where``."""
    try:
        state: dict[int, dict[str, Any]] = {}
        for key, value in [*tensors.items(), *meta["scalars"].items()]:
            _, idx, name = key.split(".", 2)
            state.setdefault(int(idx), {})[name] = value
        groups = [{**g, "betas": tuple(g["betas"])} if "betas" in g else dict(g) for g in meta["param_groups"]]
    except (KeyError, ValueError, TypeError, AttributeError) as err:
        raise ValueError(tr("{where}: not the optimizer state attnlab saves ({err_type}: {err}); the checkpoint is "
                            "damaged", where=where, err_type=type(err).__name__, err=err)) from None
    return {"state": state, "param_groups": groups}
