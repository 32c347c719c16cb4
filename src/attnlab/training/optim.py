"""AdamW with weight decay where it belongs; the warm-up + cosine learning-rate schedule, and the paper's
warm-up + inverse-square-root one."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from attnlab.i18n import tr


def configure_optimizer(model: nn.Module, learning_rate: float, weight_decay: float,
                        betas: tuple[float, float]) -> torch.optim.AdamW:
    """AdamW with two groups: matrices (and embeddings) decay; biases and LayerNorm gains do not.

    Why: decay pulls weights towards zero to keep them small; a 1-d gain or bias sets a scale or an
    offset, and pulling it to zero only hurts (nanoGPT, GPT-2 and BERT all exempt them).
    """
    params = [p for p in model.parameters() if p.requires_grad]  # tied weights appear once
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # the fused kernel updates every tensor in one pass: about 4x faster than foreach on the CPU; weights in pieces
    # (DTensors, under FSDP or TP) take foreach, the fused kernel has no rule for them
    fused = all(p.device.type in ("cpu", "cuda") and p.dtype in (torch.float32, torch.float16, torch.bfloat16)
                and not isinstance(p, DTensor) for p in params)
    return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=fused or None)


def lr_at(step: int, learning_rate: float, min_lr: float, warmup_iters: int, decay_iters: int) -> float:
    """The learning rate for optimizer step ``step`` (0-based).

    Linear warm-up over ``warmup_iters`` steps (to ``learning_rate`` at the last one), then a half
    cosine down to ``min_lr`` at ``decay_iters``, then ``min_lr``.
    """
    return CosineSchedule(learning_rate, min_lr, warmup_iters, decay_iters)(step)


@dataclass
class CosineSchedule:
    """Linear warm-up over ``warmup`` steps, then a half cosine that reaches ``min_lr`` at step ``end``.

    The cosine can be re-planned mid-way (:meth:`replan`): a time budget moves ``end`` when the machine's speed
    changes. The rate must not jump, so the new plan starts where the old one stands: the cosine's progress is
    ``anchor_progress`` at step ``anchor`` (0 at the end of warm-up until a re-plan) and runs on linearly to 1 at
    ``end``. Never re-planned, it is :func:`lr_at`.
    """

    learning_rate: float
    min_lr: float
    warmup: int
    end: int
    anchor: int | None = None       # None: the end of warm-up
    anchor_progress: float = 0.0

    def progress(self, step: int) -> float:
        """How far along the cosine step ``step`` is: 0 at its start, 1 at ``end`` and after."""
        anchor = self.warmup if self.anchor is None else self.anchor
        if step >= self.end:
            return 1.0
        return self.anchor_progress + (1.0 - self.anchor_progress) * (step - anchor) / max(1, self.end - anchor)

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return self.learning_rate * (step + 1) / self.warmup
        cosine = 0.5 * (1.0 + math.cos(math.pi * self.progress(step)))
        return self.min_lr + cosine * (self.learning_rate - self.min_lr)

    def replan(self, step: int, end: int) -> None:
        """From step ``step`` on, reach ``min_lr`` at ``end`` instead (at once if ``end <= step``), with the same
        rate at ``step`` as before: the rest of the cosine, stretched or squeezed. During warm-up only ``end``
        moves: the cosine has not started."""
        if step > self.warmup:
            self.anchor, self.anchor_progress = step, self.progress(step)
        self.end = end

    def state_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def inverse_sqrt_lr(step: int, learning_rate: float, warmup_iters: int) -> float:
    """The schedule of "Attention Is All You Need" (§5.3), peaking at ``learning_rate`` when warm-up ends.

    The paper: ``lrate = d_model^-0.5 · min(n^-0.5, n · warmup^-1.5)`` for step ``n = step + 1``: a
    linear rise for ``warmup`` steps, then a fall as ``1/√n``. Its peak, at ``n = warmup``, is
    ``(d_model · warmup)^-0.5``; so ``learning_rate = (d_model · warmup_iters) ** -0.5`` gives the paper's
    numbers exactly, and any other ``learning_rate`` scales the same shape.
    """
    if warmup_iters < 1:
        raise ValueError(tr("warmup_iters: the inverse-square-root schedule needs at least 1 warm-up step, got "
                            "{warmup_iters!r}", warmup_iters=warmup_iters))
    n = step + 1
    return learning_rate * warmup_iters**0.5 * min(n**-0.5, n * warmup_iters**-1.5)
