"""What a training run needs in memory at the least, known before a byte of the model is allocated.

The model is built on torch's ``meta`` device (shapes, no storage) to count its parameters exactly; each one
costs 16 bytes while training in fp32 (the weight, its gradient and AdamW's two moments), and one micro-batch's
logits and their gradient cost ``8 · batch · T · vocab`` bytes. The activations come on top: this is a lower bound,
so a run it refuses could never train on this device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from attnlab.i18n import tr
from attnlab.memory import check_fits


def training_bytes(build: Callable[[Any], nn.Module], model_config: Any, batch_size: int,
                   vocab_size: int) -> tuple[int, int]:
    """``(bytes at the least, parameters)`` of training ``build(model_config)`` on batches of ``batch_size``."""
    with torch.device("meta"):
        model = build(model_config)
    params = sum(p.numel() for p in model.parameters())
    return 16 * params + 8 * batch_size * model_config.context_length * vocab_size, params


def check_training_fits(build: Callable[[Any], nn.Module], model_config: Any, batch_size: int, vocab_size: int,
                        device: torch.device) -> None:
    """Refuse a model and batch that cannot fit ``device``'s memory (see the module), naming what sets the sizes."""
    need, params = training_bytes(build, model_config, batch_size, vocab_size)
    available, where = None, ""
    if device.type == "cuda":
        available = torch.cuda.get_device_properties(device).total_memory
        where = tr("the GPU's memory")
    what = tr("training {params:,} parameters on batches of {batch:,} × {context_length:,} tokens", params=params,
              batch=batch_size, context_length=model_config.context_length)
    check_fits(need, what, "batch_size, context_length, model sizes", available, where)
