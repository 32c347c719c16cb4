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

import functools
import itertools
import operator
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor, nn
from torch.nn.modules import module as torch_module

from attnlab.fast.linear import linear

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
    weights: list[Tensor] = [m.weight for m in linears]
    biases: list[Tensor | None] = [m.bias for m in linears]
    if scale_first != 1.0:  # a copy only when there is something to scale
        weights[0] = weights[0] * scale_first
        biases[0] = None if biases[0] is None else biases[0] * scale_first
    present = [b for b in biases if b is not None]
    if len(present) < len(biases):
        return torch.cat(weights), None
    return torch.cat(weights), torch.cat(present)


def stacking(linears: tuple[nn.Module, ...]) -> Callable[..., Callable[[Tensor], Tensor]] | None:
    """How to stack these maps into one (None: they cannot be): maps of one class, each calling nothing but its
    ``forward``, the class ``nn.Linear`` or one with a ``stack`` class method."""
    kind = type(linears[0])
    if not all(calls_only_forward(m, kind) for m in linears):
        return None
    return _stack_plain if kind is nn.Linear else getattr(kind, "stack", None)


def _stack_plain(*linears: nn.Linear) -> Callable[[Tensor], Tensor]:
    """``nn.Linear`` maps stacked: ``fused(x)`` is their outputs side by side, ``(..., d_in)`` -> ``(..., Σ d_out)``,
    by :func:`~attnlab.fast.linear.linear` (a partial: no Python frame of its own at every step)."""
    weight, bias = stack_linears(*linears)
    return functools.partial(linear, weight=weight, bias=bias)


def _side_by_side(linears: tuple[nn.Module, ...]) -> Callable[[Tensor], Tensor] | None:
    """While ``torch.compile`` traces: plain ``nn.Linear`` maps each through :func:`linear`, their outputs
    concatenated (a graph cannot keep a stacked copy, and stacking at every step would copy the weights). Called as
    modules, the maps would run torch's product, which reads the weights of a decoding step's few rows at half the
    speed of attnlab's CPU kernel (gpt2-small's q, k and v: 85 MB a token). None for other maps: called as they are."""
    if stacking(linears) is not _stack_plain:
        return None
    plain = [m for m in linears if isinstance(m, nn.Linear)]  # all of them: stacking found plain nn.Linear maps
    return lambda x: torch.cat([linear(x, m.weight, m.bias) for m in plain], dim=-1)


def calls_only_forward(module: nn.Module, cls: type[nn.Module]) -> bool:
    """Whether ``module(x)`` would run ``cls.forward`` and nothing else, so that reading its weights directly (as
    :func:`stack_linears` does) is the same as calling it: a ``cls`` itself (not a subclass such as a LoRA or
    quantised linear), its ``forward`` not replaced, and no hook, its own or global, forward or backward.

    PyTorch offers no public way to ask whether a module has hooks; this is the very test ``nn.Module.__call__``
    makes before it skips straight to ``forward``, so when it holds nobody can tell the two apart.
    """
    return type(module) is cls and "forward" not in vars(module) and not _hooked(module)


def _hooked(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks or torch_module._global_forward_hooks
                or torch_module._global_forward_pre_hooks or torch_module._global_backward_hooks
                or torch_module._global_backward_pre_hooks)


_VERSION, _DATA_PTR = operator.attrgetter("_version"), operator.methodcaller("data_ptr")
_DTYPE, _DEVICE = operator.attrgetter("dtype"), operator.attrgetter("device")
_VALUES = operator.methodcaller("values")


class Held:
    """A stacked copy of some maps' weights, and what it was made from: the maps (as objects), their tensors (weak
    references: a new tensor at a freed one's address is not taken for it) and each tensor's version, storage,
    dtype and device. :meth:`holds` is the check of every step, in builtins only (a decoding step makes it once per
    fused map of every layer): the dicts it reads are the very dicts of the maps, found once."""

    def __init__(self, linears: tuple[nn.Module, ...], tensors: list[Tensor], fused: Callable[[Tensor], Tensor],
                 span: int) -> None:
        self.linears, self.fused, self.span = linears, fused, span
        self.refs = [weakref.ref(t) for t in tensors]
        self.stamps = _stamps(tensors)
        self.tensor_dicts = [d for m in linears for d in (m._parameters, m._buffers)]
        self.own_dicts = [m.__dict__ for m in linears]  # a ``forward`` of its own replaces the class's
        self.hook_dicts = [d for m in linears for d in (m._forward_hooks, m._forward_pre_hooks, m._backward_hooks,
                                                        m._backward_pre_hooks)] + _global_hooks()

    def holds(self, linears: tuple[nn.Module, ...]) -> bool:
        """Whether this copy is still the maps' weights: the same maps, unhooked, whose tensors are the same
        objects, unchanged since (no version, storage, dtype or device moved)."""
        if not all(map(operator.is_, linears, self.linears)) or any(map(len, self.hook_dicts)) \
                or any(map(operator.contains, self.own_dicts, itertools.repeat("forward"))):
            return False
        tensors = list(map(operator.call, self.refs))
        current: list[Tensor] = list(filter(_NOT_NONE, itertools.chain.from_iterable(map(_VALUES,
                                                                                          self.tensor_dicts))))
        if len(tensors) != len(current) or not all(map(operator.is_, tensors, current)):
            return False
        return (tuple(map(_VERSION, tensors)), tuple(map(_DATA_PTR, tensors)), tuple(map(_DTYPE, tensors)),
                tuple(map(_DEVICE, tensors))) == self.stamps


def _global_hooks() -> list[dict]:
    return [torch_module._global_forward_hooks, torch_module._global_forward_pre_hooks,
            torch_module._global_backward_hooks, torch_module._global_backward_pre_hooks]


_NOT_NONE = functools.partial(operator.is_not, None)


def _tensors(linears: tuple[nn.Module, ...]) -> list[Tensor]:
    """Every parameter and buffer of ``linears``, read from each module's own dicts (nn.Module.__getattr__ would cost
    a Python call per weight)."""
    return [t for m in linears for d in (m._parameters, m._buffers) for t in d.values() if t is not None]


def _stamps(tensors: list[Tensor]) -> tuple:
    """What changes when a weight does: its version (an in-place edit), its storage and dtype (``module.to()`` swaps
    a parameter's ``.data``, keeping the object and its version)."""
    return (tuple(map(_VERSION, tensors)), tuple(map(_DATA_PTR, tensors)), tuple(map(_DTYPE, tensors)),
            tuple(map(_DEVICE, tensors)))


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
    if held is not None and span and held.span == span:  # checked earlier in this fixed_weights() span
        return held.fused
    if held is not None and held.holds(linears):  # checked when it was made, and nothing has changed since
        held.span = span
        return held.fused
    stack = stacking(linears)
    if stack is None:
        return None
    tensors = _tensors(linears)
    # made under inference_mode (no version counter to follow), or a tensor subclass (a quantized weight, say)
    if any(t.is_inference() or type(t) not in (Tensor, nn.Parameter) for t in tensors):
        return None
    held = Held(linears, tensors, stack(*linears), span)
    owner.__dict__[_ATTRIBUTE] = held
    return held.fused
