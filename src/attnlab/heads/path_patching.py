"""Path patching: a head's effect through one input of a later head alone (Wang et al., 2022; Goldowsky-Dill et
al., 2023), the way the IOI and induction analyses find which head feeds which.

Activation patching says a head matters; it does not say through which later head, or through which of that head's
inputs. Path patching keeps every other route at the corrupted run's values:

1. the corrupted run, with the *sender* head's output taken from the clean run and every attention module's output
   held at the corrupted run's (so the sender's change reaches later layers through the residual stream, and the
   feed-forward layers, never through another head); the *receivers'* queries, keys or values are recorded;
2. the corrupted run again, with one receiver's query, key or value (at every position) set to what step 1
   recorded, and everything after it computed as usual: the metric of that run.

So ``path_patch(..., sender=(0, 3), site="key")[1, 2]`` is the metric when head 3 of layer 0 reaches the output
only through the keys of head 2 of layer 1: K-composition, if it is large (Elhage et al., 2021). Receivers must lie
in later layers; the rows of the sender's layer and those before it are NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from attnlab.heads.hooks import as_found, forward, record, split_heads
from attnlab.heads.patching import Metric, Patch, spread, sweep
from attnlab.heads.sites import Inputs, Patchable, patchable
from attnlab.i18n import tr


def _frozen_edits(pm: Patchable, clean: Inputs, corrupt: Inputs, sender: tuple[int, int]) -> dict:
    """Every attention module's output held at the corrupted run's, the sender's head from the clean run."""
    layer, head = sender
    modules = [m for block in pm.mixers for m in block]
    held = {}

    def keep(module: nn.Module):
        def hook(m, args):
            held[module] = args[0].detach()
        return hook

    # the corrupted run's out_proj inputs of every mixer (a translation model's self-attention too)
    handles = [m.out_proj.register_forward_pre_hook(keep(m)) for m in modules]
    try:
        pm.run(corrupt)
    finally:
        for handle in handles:
            handle.remove()
    sender_clean = record(pm, clean, [(layer, "output")])[(layer, "output")]
    heads = pm.layers[layer].num_heads
    sender_module = pm.layers[layer].attention
    patched = split_heads(held[sender_module].clone(), heads)
    patched[..., head, :] = split_heads(sender_clean, heads)[..., head, :]
    held[sender_module] = patched.flatten(-2)
    return held


def _run_frozen(pm: Patchable, corrupt: Inputs, held: dict, places: list) -> dict:
    """Step 1: the corrupted run with every mixer's output replaced by ``held``; the tensors at ``places``."""
    modules = list(held)
    handles = [m.out_proj.register_forward_pre_hook(lambda mod, args, t=held[m]: (t, *args[1:]))
               for m in modules]
    try:
        _, kept = forward(pm, corrupt, keep=places)
    finally:
        for handle in handles:
            handle.remove()
    return {place: t.detach() for place, t in kept.items()}


def path_patch(model: nn.Module, clean: Inputs, corrupt: Inputs, metric: Metric, sender: tuple[int, int],
               site: str = "key", layers: Sequence[int] | None = None) -> Tensor:
    """The sender head's effect through each later head's ``site`` alone.

    Args:
        model, clean, corrupt, metric: as :func:`attnlab.heads.patching.patch_heads`.
        sender: ``(layer, head)`` whose clean output is sent.
        site: the receivers' input the effect goes through: ``"query"``, ``"key"`` or ``"value"``.
        layers: the receivers' layers (None: every layer after the sender's).

    Returns:
        ``(num_layers, heads)``: the metric with the sender's clean output reaching the output only through that
        receiver's ``site`` (NaN for the sender's layer, the layers before it and those not asked for).
    """
    pm = patchable(model)
    clean, corrupt = pm.check_pair(clean, corrupt)
    site = pm.check_site(site)
    if site == "output":
        raise ValueError(tr("path patching goes through a receiver's query, key or value; site='output' is "
                            "activation patching (patch_heads)"))
    if not isinstance(sender, tuple | list) or len(sender) != 2:
        raise ValueError(tr("sender must be a (layer, head) pair, got {sender!r}", sender=sender))
    s_layer = pm.check_layer(sender[0], "sender layer")
    s_head = pm.check_head(sender[1], "output", "sender head")
    receivers = [layer for layer in pm.check_layers(layers) if layer > s_layer]
    heads = pm.heads(site)
    if not receivers:
        return torch.full((pm.num_layers, heads), float("nan"))
    with as_found(model), torch.no_grad():
        held = _frozen_edits(pm, clean, corrupt, (s_layer, s_head))
        sent = _run_frozen(pm, corrupt, held, [(layer, site) for layer in receivers])
        groups = [[Patch(layer, h, site)] for layer in receivers for h in range(heads)]
        values = sweep(pm, sent, corrupt, metric, groups)
    return spread(pm, values, receivers, (heads,))
