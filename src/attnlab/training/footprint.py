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
                   vocab_size: int, shards: int = 1) -> tuple[int, int]:
    """``(bytes at the least, parameters)`` of training ``build(model_config)`` on batches of ``batch_size``, the
    weights, gradients and moments shared by ``shards`` processes (FSDP, TP: each holds at least its share)."""
    with torch.device("meta"):
        model = build(model_config)
    params = sum(p.numel() for p in model.parameters())
    return 16 * params // shards + 8 * batch_size * model_config.context_length * vocab_size, params


def check_training_fits(build: Callable[[Any], nn.Module], model_config: Any, batch_size: int, vocab_size: int,
                        device: torch.device, shards: int = 1) -> None:
    """Refuse a model and batch that cannot fit ``device``'s memory (see the module), naming what sets the sizes;
    ``shards``: the processes that share the weights (1 unless they are sharded)."""
    need, params = training_bytes(build, model_config, batch_size, vocab_size, shards)
    available, where = None, ""
    if device.type == "cuda":
        available = torch.cuda.get_device_properties(device).total_memory
        where = tr("the GPU's memory")
    what = tr("training {params:,} parameters on batches of {batch:,} × {context_length:,} tokens", params=params,
              batch=batch_size, context_length=model_config.context_length)
    check_fits(need, what, "batch_size, context_length, model sizes", available, where)


# ---- the memory of a training run, on paper (docs/scale.md) -----------------------------------------------------
#: bytes a parameter costs while training with AdamW in fp32 (also the master weights under bf16): the weight, its
#: gradient and the two moments
STATE_BYTES = 16


def state_bytes(split: int, rest: int, dp: int = 1, tp: int = 1) -> float:
    """Weights + gradients + AdamW's moments held by one process: the ``split`` parameters that tensor parallelism
    divides over ``tp`` and the ``rest`` that it keeps whole, both sharded over the ``dp`` processes of FSDP (DDP:
    ``dp = tp = 1``, every process holds it all)."""
    return STATE_BYTES * (split / (dp * tp) + rest / dp)


def block_activations(model_config: Any, tp: int = 1) -> int:
    """Elements one block keeps for backward, per token: its norms' and maps' inputs, which every process of a TP
    group keeps whole (``4·d_model``), and what its heads and hidden units make, which they split: the attention's
    output (``q``), queries, keys and values (``q + 2·kv``) and the feed-forward's hidden tensors (GELU: its input and
    output, ``2·d_ff``; SwiGLU: the gate, its SiLU, the up projection and their product, ``4·d_ff``)."""
    c = model_config
    head_dim = getattr(c, "head_dim", None) or c.d_model // c.num_heads
    q = c.num_heads * head_dim
    kv = (getattr(c, "num_kv_heads", None) or c.num_heads) * head_dim
    hidden = (4 if hasattr(c, "num_kv_heads") else 2) * c.d_ff
    return 4 * c.d_model + (q + q + 2 * kv + hidden) // tp


def activation_bytes(model_config: Any, tokens: int, tp: int = 1, checkpointing: bool = False,
                     dtype_bytes: int = 2) -> int:
    """Bytes of activations for ``tokens`` tokens (batch × sequence) on one process: every block's saved tensors
    (:func:`block_activations`) in ``dtype_bytes`` (bf16: 2), or with activation checkpointing each block's input
    alone plus one block's tensors remade in backward; and the logits with their gradient in fp32 (8 bytes a score).
    A lower bound: the allocator's slack and the kernels' workspaces come on top."""
    c = model_config
    per_block = block_activations(c, tp) * dtype_bytes
    blocks = (c.num_layers * c.d_model * dtype_bytes + per_block) if checkpointing else c.num_layers * per_block
    return tokens * (blocks + 8 * c.vocab_size)
