"""The dtypes a model computes in: the short names the command line and configs use, and autocast's dtype.

Under ``torch.autocast`` a model keeps float32 weights but its matmuls run in bfloat16 or float16, so the
keys and values it produces, and the cache that keeps them, are in that dtype, not the weights'.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.i18n import tr

#: the short names (``--dtype``, the ``dtype`` key of a training config) and what they mean
DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def check_dtype_name(dtype: str, name: str = "dtype") -> torch.dtype:
    """``"fp32"``, ``"bf16"`` or ``"fp16"`` -> the torch dtype; anything else is a ValueError naming the choices."""
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(tr("{name}: expected one of {dtypes}, got {dtype!r}", name=name,
                            dtypes=', '.join(map(repr, DTYPES)), dtype=dtype))
    return DTYPES[dtype]


def compute_dtype(weight: Tensor) -> torch.dtype:
    """The dtype a layer with this weight computes in here: autocast's where it is on for the weight's device,
    else the weight's own (e.g. bfloat16 for a model cast with ``.to(torch.bfloat16)``)."""
    device = weight.device.type
    if torch.is_autocast_enabled(device) and weight.is_floating_point():
        return torch.get_autocast_dtype(device)
    return weight.dtype
