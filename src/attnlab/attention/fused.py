"""Inference-time fused projections: q, k and v (or a SwiGLU's gate and up) as one matrix product.

Decoding a token multiplies one vector by each weight matrix. Three products over ``W_query``, ``W_key`` and
``W_value`` read the same bytes as one over the three stacked, but cost three kernel calls and three small thread
hand-offs instead of one. Stacking at every call would copy the weights (as much work as the product itself), so
the stacked copy is made once and kept beside the module, rebuilt when a weight changes (another tensor, or its
version counter, storage or dtype moved: ``load_state_dict``, ``.to()``, an in-place edit) and dropped by any call
in training mode or with autograd on (an optimizer's fused kernels update weights without moving their version
counters).

Only at inference (eval mode, no autograd), only when calling each map would run its class's ``forward`` and nothing
else (:func:`calls_only_forward`: a hooked or wrapped map is called as it is), for ``nn.Linear`` and for a map class
that says how to stack its kind (a ``stack`` class method: the int8 maps, whose codes stack as they are), and
not while ``torch.compile`` traces (reading a weight's version is host work a graph cannot hold: there plain
``nn.Linear`` maps each run attnlab's product, their outputs side by side). The price is the memory of one more copy
of the fused weights.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.modules import module as torch_module

from attnlab.functional.linear import linear

_ATTRIBUTE = "_fused_inference"  # where the stacked copy lives on the module: not a parameter, not saved
_SPANS = itertools.count(1)
_SPAN: ContextVar[int] = ContextVar("attnlab_fixed_weights", default=0)  # 0: outside any fixed_weights()


@contextmanager
def fixed_weights() -> Iterator[None]:
    """A span in which no weight changes (a search's decoding loop, which calls nothing else): each stacked copy is
    checked at its first use in the span, then trusted as it is, instead of being checked again at every step."""
    token = _SPAN.set(next(_SPANS))
    try:
        yield
    finally:
        _SPAN.reset(token)


def stack_linears(*linears: nn.Linear, scale_first: float = 1.0) -> tuple[Tensor, Tensor | None]:
    """The linears' weights and biases stacked as one map, the first one's times ``scale_first``:
    ``F.linear(x, *stack_linears(a, b))`` is ``cat([a(x), b(x)], -1)`` (no bias if any of them lacks one)."""
    weights, biases = [m.weight for m in linears], [m.bias for m in linears]
    if scale_first != 1.0:  # a copy only when there is something to scale
        weights[0] = weights[0] * scale_first
        biases[0] = None if biases[0] is None else biases[0] * scale_first
    if any(b is None for b in biases):
        return torch.cat(weights), None
    return torch.cat(weights), torch.cat(biases)


class StackedLinear(NamedTuple):
    """Stacked ``nn.Linear`` maps: ``self(x)`` is their outputs side by side, ``(..., d_in)`` -> ``(..., Σ d_out)``."""

    weight: Tensor
    bias: Tensor | None

    def __call__(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)


def stacking(linears: tuple[nn.Module, ...]) -> Callable[..., Callable[[Tensor], Tensor]] | None:
    """How to stack these maps into one (None: they cannot be): maps of one class, each calling nothing but its
    ``forward``, the class ``nn.Linear`` or one with a ``stack`` class method."""
    kind = type(linears[0])
    if not all(calls_only_forward(m, kind) for m in linears):
        return None
    return _stack_plain if kind is nn.Linear else getattr(kind, "stack", None)


def _stack_plain(*linears: nn.Linear) -> StackedLinear:
    return StackedLinear(*stack_linears(*linears))


def _side_by_side(linears: tuple[nn.Module, ...]) -> Callable[[Tensor], Tensor] | None:
    """While ``torch.compile`` traces: plain ``nn.Linear`` maps each through :func:`linear`, their outputs
    concatenated (a graph cannot keep a stacked copy, and stacking at every step would copy the weights). Called as
    modules, the maps would run torch's product, which reads the weights of a decoding step's few rows at half the
    speed of attnlab's CPU kernel (gpt2-small's q, k and v: 85 MB a token). None for other maps: called as they are."""
    if stacking(linears) is not _stack_plain:
        return None
    return lambda x: torch.cat([linear(x, m.weight, m.bias) for m in linears], dim=-1)


def calls_only_forward(module: nn.Module, cls: type[nn.Module]) -> bool:
    """Whether ``module(x)`` would run ``cls.forward`` and nothing else, so that reading its weights directly (as
    :func:`stack_linears` does) is the same as calling it: a ``cls`` itself (not a subclass such as a LoRA or
    quantised linear), its ``forward`` not replaced, and no hook, its own or global, forward or backward.

    PyTorch offers no public way to ask whether a module has hooks; this is the very test ``nn.Module.__call__``
    makes before it skips straight to ``forward``, so when it holds nobody can tell the two apart.
    """
    hooks = (module._forward_hooks, module._forward_pre_hooks, module._backward_hooks, module._backward_pre_hooks,
             torch_module._global_forward_hooks, torch_module._global_forward_pre_hooks,
             torch_module._global_backward_hooks, torch_module._global_backward_pre_hooks)
    return type(module) is cls and "forward" not in vars(module) and not any(hooks)


def _tensors(linears: tuple[nn.Module, ...]) -> list[Tensor]:
    # read from each module's own dicts: nn.Module.__getattr__ would cost a Python call per weight, per step
    return [t for m in linears for d in (m._parameters, m._buffers) for t in d.values() if t is not None]


def _stamps(tensors: list[Tensor]) -> list[tuple]:
    """What changes when a weight does: its version (an in-place edit), its storage and dtype (``module.to()`` swaps
    a parameter's ``.data``, keeping the object and its version)."""
    return [(t._version, t.data_ptr(), t.dtype, t.device) for t in tensors]


def _still(held: tuple, tensors: list[Tensor]) -> bool:
    """Whether the stacked copy ``held`` was made from these very tensors, unchanged since (weak references: a new
    tensor at a freed one's address is not taken for it)."""
    refs, stamps = held[0]
    return len(refs) == len(tensors) and all(r() is t for r, t in zip(refs, tensors, strict=True)) \
        and _stamps(tensors) == stamps


def fused_map(owner: nn.Module, *linears: nn.Module) -> Callable[[Tensor], Tensor] | None:
    """``linears`` stacked as one map (``fused(x)`` is the concatenation of their outputs), kept on ``owner``; while
    ``torch.compile`` traces, plain ``nn.Linear`` maps side by side instead (:func:`_side_by_side`); None where the
    maps must be called one by one (training, autograd, compiling other maps, maps that :func:`stacking` cannot
    stack, a weight that is a tensor subclass or was made under ``inference_mode``)."""
    if owner.training or torch.is_grad_enabled():
        # Training is under way: drop the copy. An optimizer's fused or foreach kernels update the weights in place
        # without moving their version counters, so the next evaluation must not trust a copy made before them.
        owner.__dict__.pop(_ATTRIBUTE, None)
        return None
    if torch.compiler.is_compiling():
        return _side_by_side(linears)
    held, span = owner.__dict__.get(_ATTRIBUTE), _SPAN.get()
    if held is not None and span and held[2] == span:  # checked earlier in this fixed_weights() span
        return held[1]
    stack = stacking(linears)
    if stack is None:
        return None
    tensors = _tensors(linears)
    if held is not None and _still(held, tensors):  # checked when it was made, and nothing has changed since
        owner.__dict__[_ATTRIBUTE] = (*held[:2], span)
        return held[1]
    # made under inference_mode (no version counter to follow), or a tensor subclass (a quantized weight, say)
    if any(t.is_inference() or type(t) not in (Tensor, nn.Parameter) for t in tensors):
        return None
    held = (([weakref.ref(t) for t in tensors], _stamps(tensors)), stack(*linears), span)
    owner.__dict__[_ATTRIBUTE] = held
    return held[1]
