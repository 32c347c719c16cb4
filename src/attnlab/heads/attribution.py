"""Attribution patching: every head's patching effect at once, to first order (Nanda, 2023; Syed et al., 2023).

Patching head h changes its tensor ``a`` from the corrupted run's ``a*`` to the clean run's ``a'``; to first order the
metric moves by

    (a' - a*) · ∂metric/∂a   at the corrupted run,

summed over the batch, the positions and the head's width. One forward and one backward pass of the corrupted run
give the gradient at every head at once (and one forward pass of the clean run its tensors), where
:func:`~attnlab.heads.patching.patch_heads` runs one pass per head. The estimate is exact for a metric linear in the
head's tensor and fails where the effect is not: a head whose patch moves an attention pattern from one key to
another (a softmax far from linear) is the known case (docs/heads.md says where it failed here).

The gradients are taken with :func:`torch.autograd.grad` with respect to a zero added at each place, so nothing is
accumulated into the parameters' ``.grad`` and the graph flows through every path after the place.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.heads.hooks import as_found, forward, record, split_heads
from attnlab.heads.patching import Metric, check_metric, check_positions
from attnlab.heads.sites import Inputs, patchable
from attnlab.i18n import tr


def attribute_heads(model: nn.Module, clean: Inputs, corrupt: Inputs, metric: Metric, site: str = "output",
                    positions: str = "all") -> Tensor:
    """The first-order estimate of :func:`~attnlab.heads.patching.patch_heads`'s change from the corrupted metric.

    Args:
        model, clean, corrupt: as :func:`~attnlab.heads.patching.patch_heads`.
        metric: logits ``(B, T, V)`` -> a 0-d tensor, differentiable.
        site: ``"output"``, ``"query"``, ``"key"`` or ``"value"``.
        positions: ``"all"`` -> ``(num_layers, heads)``; ``"each"`` -> ``(num_layers, heads, T)``, one term per
            position (they sum to the ``"all"`` value).

    Returns:
        ``Σ (clean − corrupted) · ∂metric/∂(tensor)`` per head (and position): an estimate of
        ``patch_heads(...) − metric(corrupted)``.
    """
    pm = patchable(model)
    clean, corrupt = pm.check_pair(clean, corrupt)
    site, positions = pm.check_site(site), check_positions(positions)
    places = [(layer, site) for layer in range(pm.num_layers)]
    heads = pm.heads(site)
    with as_found(model):
        sources = record(pm, clean, places)
        zeros = {place: torch.zeros_like(t, requires_grad=True) for place, t in sources.items()}
        seen: dict = {}

        def shift(place):
            def edit(t: Tensor) -> Tensor:
                seen[place] = t.detach()
                return t + zeros[place]
            return edit

        with torch.enable_grad():
            logits, _ = forward(pm, corrupt, {place: shift(place) for place in places})
            value = check_metric(metric(logits))
            if not value.requires_grad:
                raise ValueError(tr("metric: attribution needs a metric that autograd can differentiate with "
                                    "respect to the logits; this one's value does not depend on them through autograd"))
            grads = torch.autograd.grad(value, [zeros[p] for p in places], allow_unused=True)
    out = []
    for place, grad in zip(places, grads, strict=True):
        if grad is None:  # nothing after this place reached the metric
            grad = torch.zeros_like(sources[place])
        term = split_heads((sources[place] - seen[place]) * grad, heads).sum(dim=(0, -1))  # (T, H)
        out.append(term.sum(dim=0) if positions == "all" else term.transpose(0, 1))
    return torch.stack(out).float()
