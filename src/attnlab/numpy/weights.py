"""Weights for the NumPy twin: one converter from a torch ``state_dict`` (or a safetensors file) to
plain arrays, shared by every function in :mod:`attnlab.numpy`.

The twin reads parameters by the very names the torch modules give them (``W_query.weight``,
``out_proj.bias``, ...), so a converted ``state_dict`` plugs straight in; :func:`subtree` picks
out one module's parameters by prefix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

Params = Mapping[str, np.ndarray]


def _to_array(name: str, value: Any, dtype: np.dtype) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "is_floating_point"):  # a torch.Tensor (duck-typed: no torch import)
        t = value.detach().cpu()
        if t.is_floating_point():
            t = t.float()  # bf16/fp16 have no (or a lossy) NumPy twin: go through fp32
        value = t.numpy()
    if not isinstance(value, np.ndarray):
        raise TypeError(f"state_dict[{name!r}] must be a torch.Tensor or numpy.ndarray, got {type(value).__name__}")
    if np.issubdtype(value.dtype, np.floating):
        return np.array(value, dtype=dtype, copy=True)
    return np.array(value, copy=True)  # integer buffers (e.g. position ids) keep their dtype


def state_dict_to_arrays(state_dict: Mapping[str, Any], dtype: np.dtype | type = np.float32) -> dict[str, np.ndarray]:
    """``{name: torch.Tensor}`` -> ``{name: numpy.ndarray}``: floating tensors become ``dtype``
    (fp32 by default), copied, detached and on the CPU; names are kept as they are.

    Example:
        >>> arrays = state_dict_to_arrays({"out_proj.weight": np.eye(2)})
        >>> arrays["out_proj.weight"].dtype
        dtype('float32')
    """
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"state_dict must be a mapping of names to tensors, got {type(state_dict).__name__}")
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(f"dtype must be a floating NumPy dtype, got {dtype}")
    return {name: _to_array(name, value, dtype) for name, value in state_dict.items()}


def load_safetensors(path: str | os.PathLike, dtype: np.dtype | type = np.float32) -> dict[str, np.ndarray]:
    """Read a ``.safetensors`` file straight into arrays (no torch), through :func:`state_dict_to_arrays`."""
    from safetensors.numpy import load_file

    return state_dict_to_arrays(load_file(os.fspath(path)), dtype)


def subtree(params: Params, prefix: str) -> dict[str, np.ndarray]:
    """The parameters under ``prefix.`` with the prefix stripped: ``subtree(p, "blocks.0")["attn.out_proj.bias"]``."""
    head = prefix.rstrip(".") + "." if prefix else ""
    found = {name[len(head):]: value for name, value in params.items() if name.startswith(head)}
    if not found:
        raise KeyError(f"no parameters under {prefix!r}; first names are {sorted(params)[:5]}")
    return found


def require(params: Params, name: str, owner: str) -> np.ndarray:
    """``params[name]`` or a KeyError that lists what is there."""
    if name not in params:
        raise KeyError(f"{owner}: missing parameter {name!r}; got {sorted(params)}")
    return params[name]
