"""Head importance and pruning (Michel et al., 2019, "Are Sixteen Heads Really Better than One?").

Give every head a gate ``ξ_h`` on its output (the model's ``head_mask``, all ones): the loss ``L(ξ)`` is then the
model's. Three measurements, on the same fixed batches of held-out text:

* **gradient importance** ``I_h = E_x |∂L(x)/∂ξ_h|`` at ``ξ = 1``: to first order, how much the loss moves if the
  head goes. As in the paper's code, ``E_x`` runs over batches, and each layer's scores are divided by their L2
  norm (the paper found this normalisation important when heads of different layers are ranked together);
* **ablation**: the loss with that one head removed (``ξ_h = 0``), minus the loss with all heads;
* **progressive pruning**: remove the least important heads first, ``k`` at a time, and record the loss.

The paper's finding: a large fraction of heads can be removed at little cost, while a few heads cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab.i18n import tr

Batch = tuple[Tensor, Tensor]


def heads_shape(model: nn.Module) -> tuple[int, int]:
    """``(num_layers, num_heads)`` of a model that takes a ``head_mask``."""
    config = getattr(model, "config", None)
    layers, heads = getattr(config, "num_layers", None), getattr(config, "num_heads", None)
    if not isinstance(layers, int) or not isinstance(heads, int):
        raise ValueError(tr("{model_type} does not say how many layers and heads it has (config.num_layers, "
                            "config.num_heads); head importance needs a GPT or a modern decoder",
                            model_type=type(model).__name__))
    return layers, heads


def mean_loss(model: nn.Module, batches: Sequence[Batch], head_mask: Tensor | None = None) -> float:
    """The mean of the batches' mean losses, with ``head_mask`` ``(num_layers, num_heads)`` applied."""
    with torch.no_grad():
        return sum(float(model(x, targets=y, head_mask=head_mask).loss) for x, y in batches) / len(batches)


def gradient_importance(model: nn.Module, batches: Sequence[Batch], normalise: bool = True) -> Tensor:
    """``(num_layers, num_heads)``: the mean over batches of ``|∂L/∂ξ_h|`` at ``ξ = 1``, each layer divided by its
    L2 norm when ``normalise``."""
    layers, heads = heads_shape(model)
    total = torch.zeros(layers, heads, dtype=torch.float64)
    for x, y in batches:
        gate = torch.ones(layers, heads, requires_grad=True, device=x.device)
        loss = model(x, targets=y, head_mask=gate).loss
        (grad,) = torch.autograd.grad(loss, gate)
        total += grad.detach().abs().double().cpu()
    importance = total / len(batches)
    if normalise:
        importance = importance / importance.norm(dim=1, keepdim=True).clamp(min=1e-20)
    return importance


def ablation(model: nn.Module, batches: Sequence[Batch], base: float | None = None) -> Tensor:
    """``(num_layers, num_heads)``: the loss with each head removed alone, minus the loss with every head."""
    layers, heads = heads_shape(model)
    device = batches[0][0].device
    base = mean_loss(model, batches) if base is None else base
    change = torch.zeros(layers, heads, dtype=torch.float64)
    for layer in range(layers):
        for head in range(heads):
            gate = torch.ones(layers, heads, device=device)
            gate[layer, head] = 0.0
            change[layer, head] = mean_loss(model, batches, gate) - base
    return change


@dataclass
class PruningPoint:
    """One point of the pruning curve."""

    fraction: float     # of all heads, removed
    pruned: int         # heads removed
    loss: float


def pruning_fractions(step: float) -> list[float]:
    """``0, step, 2·step, …`` up to 1 (included)."""
    if isinstance(step, bool) or not isinstance(step, int | float) or not 0 < step < 1:
        raise ValueError(tr("prune step must be a fraction in (0, 1), got {step!r}", step=step))
    count = int(round(1 / step, 9))
    return [round(min(1.0, i * step), 6) for i in range(count + 1)] + ([] if count * step >= 1 - 1e-9 else [1.0])


def pruning_order(importance: Tensor) -> list[tuple[int, int]]:
    """Every head ``(layer, head)`` of an ``(num_layers, num_heads)`` importance, least important first (ties: the
    lower layer, then the lower head)."""
    heads = importance.shape[1]
    flat = importance.flatten().tolist()
    return [divmod(k, heads) for k in sorted(range(len(flat)), key=lambda k: (flat[k], k))]


def pruning_curve(model: nn.Module, batches: Sequence[Batch], importance: Tensor, step: float = 0.1,
                  on_point: Callable[[PruningPoint], None] | None = None) -> list[PruningPoint]:
    """Remove heads in increasing ``importance`` (ties: lower layer, then lower head first) and record the loss at
    each fraction of :func:`pruning_fractions`."""
    layers, heads = heads_shape(model)
    order = [layer * heads + head for layer, head in pruning_order(importance)]
    device = batches[0][0].device
    points = []
    for fraction in pruning_fractions(step):
        pruned = round(fraction * layers * heads)
        gate = torch.ones(layers * heads, device=device)
        gate[order[:pruned]] = 0.0
        points.append(PruningPoint(fraction, pruned, mean_loss(model, batches, gate.view(layers, heads))))
        if on_point is not None:
            on_point(points[-1])
    return points


def held_out_batches(tokens, context_length: int, batch_size: int, count: int, seed: int) -> list[Batch]:
    """``count`` fixed batches of ``batch_size`` windows of ``context_length + 1`` tokens drawn from ``tokens`` (a 1-d
    array of ids), the same for every measurement: inputs and targets ``(B, T)``."""
    from attnlab.data.tokens import check_long_enough, get_batch, stream_generator

    check_long_enough(tokens, context_length, "held-out")
    return [get_batch(tokens, context_length, batch_size, stream_generator(seed, "prune", i)) for i in range(count)]
