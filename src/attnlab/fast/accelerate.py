"""``accelerate(model)``: the model's plain modules swapped for their fast twins, the parameters shared.

The model a learner reads is plain PyTorch: ``nn.Linear`` maps, ``torch.softmax``, ``F.scaled_dot_product_attention``.
Speed is applied to it from here, the way torchtitan applies tensor parallelism or ``torch.compile``: by swapping
modules, each for a subclass that computes the same function faster on this machine.

======================================  =========================================  ===============================
plain module                            fast twin                                  what changes
======================================  =========================================  ===============================
attention (``MultiHeadAttention``, any   :class:`~attnlab.fast.attention.            q/k/v as one product; a CPU
module built from an ``AttentionSpec``)  FastAttention`                              decoding step's few queries by
                                                                                   the few-query kernel; CPU half
                                                                                   training over few keys in fp32
multi-head latent attention (MLA, DSA)  :class:`~attnlab.fast.latent.               on the CPU, values padded to
                                        FastLatentAttention`                        the queries' width: torch's
                                                                                   fused kernel, not its math one
``SwiGLU``                              :class:`~attnlab.fast.feedforward.          gate and up as one product
                                        FastSwiGLU`
``FeedForward``                         :class:`~attnlab.fast.feedforward.          the activation fused into the
                                        FastFeedForward`                            packed map; GELU's σ form in a
                                                                                   compiled CPU graph
every other ``nn.Linear`` of a decoder  :class:`~attnlab.fast.linear.FastLinear`   attnlab's few-row fp32 kernel
every ``nn.Linear`` of an encoder       :class:`~attnlab.fast.packed.PackedLinear`  oneDNN's packed weights
======================================  =========================================  ===============================

(an encoder: a model none of whose attention is causal, such as the pretrained MiniLM). A kind of attention with a
forward of its own (the differential attention, a subclass of the one module) keeps its module: FastAttention's
speed is the one module's forward; its output map is swapped as any other. Each twin is proven equal to
the module it replaces (tests/fast/). ``generate``, ``attnlab sample``, ``translate``, the trainer and the
benchmarks apply it by default, through :func:`accelerated`, which leaves the caller's model as it is.
"""

from __future__ import annotations

import warnings
import weakref

from torch import nn

from attnlab.attention.latent import LatentAttention
from attnlab.attention.multihead import MultiHeadAttention
from attnlab.fast.attention import FastAttention
from attnlab.fast.feedforward import FastFeedForward, FastSwiGLU
from attnlab.fast.latent import TWINS as LATENT_TWINS
from attnlab.fast.latent import PaddedValues, latent_twin
from attnlab.fast.linear import FastLinear
from attnlab.fast.packed import PackedLinear
from attnlab.fast.twins import twin_of
from attnlab.layers.feedforward import FeedForward
from attnlab.layers.swiglu import SwiGLU

#: the modules whose own projections a fast twin fuses: their maps are left to it
FUSED_MAPS: dict[type[nn.Module], tuple[str, ...]] = {
    MultiHeadAttention: ("W_query", "W_key", "W_value"),
    SwiGLU: ("gate_proj", "up_proj"),
}
FAST = (FastAttention, PaddedValues, FastSwiGLU, FastFeedForward, FastLinear, PackedLinear)


class AccelerateWarning(UserWarning):
    """``accelerate`` says what it did where that may not be what was meant (a model in training mode, or one
    accelerated already)."""


def is_accelerated(model: nn.Module) -> bool:
    """Whether any module of ``model`` is a fast twin."""
    return any(isinstance(m, FAST) for m in model.modules())


def accelerate(model: nn.Module) -> nn.Module:
    """``model`` with its plain modules swapped, in place, for their fast twins (the table above); returns ``model``.

    The parameters, buffers, state dict and outputs stay as they were (to float rounding: logits within 1e-5 in
    fp32, the same greedy tokens; tested for every architecture). In training mode the training paths apply at once
    (q/k/v stacked through autograd, the half-precision attention rule) and the inference ones (the weights stacked
    once and kept, the few-row and few-query kernels) from ``model.eval()`` on. A model accelerated already is
    returned as it is.

    Example:
        >>> from attnlab.models import GPT, GPTConfig
        >>> model = accelerate(GPT(GPTConfig.from_preset("tiny")).eval())
        >>> type(model.blocks[0].attn).__name__, type(model.head).__name__
        ('FastAttention', 'FastLinear')
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"accelerate: model must be a torch nn.Module, got {type(model).__name__}")
    name = type(model).__name__
    if is_accelerated(model):
        warnings.warn(f"accelerate: {name} is accelerated already; it is returned as it is", AccelerateWarning,
                      stacklevel=2)
        return model
    if model.training:
        warnings.warn(f"accelerate: {name} is in training mode: its training paths apply now (q, k and v stacked "
                      "into one product, half-precision attention over few keys in float32 on a CPU); the inference "
                      "paths (weights stacked once, the few-row and few-query CPU kernels) apply once it is in eval "
                      "mode", AccelerateWarning, stacklevel=2)
    return swap_modules(model)


def swap_modules(model: nn.Module) -> nn.Module:
    """:func:`accelerate`'s swaps, in place, without its checks and notes (for callers that know the model)."""
    # a decoder: any causal attention, the one module's or a kind of its own (MLA keeps ``is_causal`` too); a
    # model of latent or linear attention is no encoder, whose packed maps would slow its decoding steps
    encoder = not any(getattr(m, "is_causal", False) is True for m in model.modules())
    _swap_children(model, encoder)
    return model


def _swap_children(parent: nn.Module, encoder: bool) -> None:
    """Each child of ``parent`` swapped for its fast twin, then the twin's own children, down the tree."""
    fused = next((names for kind, names in FUSED_MAPS.items() if isinstance(parent, kind)), ())
    for name, child in list(parent._modules.items()):
        if child is None:
            continue
        activation = parent.activation if isinstance(parent, FeedForward) and name == "linear1" else "none"
        twin = _twin(child, encoder, skip_linear=name in fused and not encoder, activation=activation)
        if twin is not None:
            setattr(parent, name, twin)
        _swap_children(child if twin is None else twin, encoder)  # what parent holds there now


def _twin(module: nn.Module, encoder: bool, skip_linear: bool, activation: str) -> nn.Module | None:
    """The fast twin of ``module`` (None: none, or it is fast already)."""
    if isinstance(module, FAST):
        return None
    if isinstance(module, LatentAttention) and type(module) in LATENT_TWINS:
        return latent_twin(module)
    if isinstance(module, MultiHeadAttention):  # a kind with a forward of its own keeps it (and its module)
        return FastAttention.from_module(module) if type(module).forward is MultiHeadAttention.forward else None
    if isinstance(module, SwiGLU):
        return FastSwiGLU.from_module(module)
    if isinstance(module, FeedForward):
        return FastFeedForward.from_module(module)
    if type(module) is nn.Linear and not skip_linear:
        return PackedLinear.from_linear(module, activation=activation) if encoder else FastLinear.from_linear(module)
    return None


_TWINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (fingerprint, its accelerated twin)


def accelerated(model: nn.Module) -> nn.Module:
    """An accelerated twin of ``model``: its modules copied (not their parameters and buffers, which are shared)
    and swapped for their fast twins, kept for the next call while ``model``'s modules and parameters stay the same
    objects. ``model`` itself is not changed; one accelerated already is returned as it is."""
    if is_accelerated(model):
        return model
    fingerprint = _fingerprint(model)
    held = _TWINS.get(model)
    if held is not None and held[0] == fingerprint:
        return held[1]
    twin = swap_modules(copy_modules(model))
    _TWINS[model] = (fingerprint, twin)
    return twin


def _fingerprint(model: nn.Module) -> tuple:
    """What a twin was made from: every module, parameter and buffer, as objects (a swapped map, a reassigned
    weight or a quantized model is a new fingerprint; weights changed in place are seen by the twin itself)."""
    return (tuple(map(id, model.modules())), tuple(map(id, model.parameters())), tuple(map(id, model.buffers())))


def copy_modules(module: nn.Module, memo: dict[int, nn.Module] | None = None) -> nn.Module:
    """A copy of ``module``'s tree of modules whose parameters and buffers are the very tensors of ``module``'s
    (a module shared by two parents stays shared), and whose hooks are its hooks (:func:`~attnlab.fast.twins.twin_of`):
    a hook on the model fires on its twin, and one removed from it is gone from both."""
    memo = {} if memo is None else memo
    if id(module) in memo:
        return memo[id(module)]
    new = twin_of(type(module), module)
    memo[id(module)] = new
    for name, child in module._modules.items():
        new._modules[name] = None if child is None else copy_modules(child, memo)
    return new
