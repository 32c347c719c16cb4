"""One forward pass with some of its activations read or replaced, by forward hooks that are gone when it returns.

A *place* is ``(layer, site)``: a head layer's ``output`` (``out_proj``'s input), ``query``, ``key`` or ``value``
(``W_query``'s, ``W_key``'s, ``W_value``'s output), or the ``residual`` stream (block ``layer``'s input); its tensor
is ``(B, T, width)``. :func:`forward` runs the model once, each ``edit`` turning the tensor at its place into the
one the model goes on with, and returns what ``keep`` asked for, as the model used it.

:func:`as_found` is where every analysis runs: in eval mode (dropout off) and with the model's own train/eval flags
put back afterwards, module by module; every hook is removed whether the pass returns or raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from attnlab.heads.sites import RESIDUAL, Inputs, Patchable
from attnlab.i18n import tr

Place = tuple[int, str]
Edit = Callable[[Tensor], Tensor]


@contextmanager
def as_found(model: nn.Module) -> Iterator[None]:
    """Eval mode for the span; each module's own ``training`` flag back after it (a partly frozen model stays so)."""
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, training in flags:
            m.training = training


class _Place:
    """The hook at one place: replaces the tensor by ``edit``'s, keeps the result; refuses a second call per pass
    (a module run twice in one forward would make "its" activation ambiguous)."""

    def __init__(self, place: Place, edit: Edit | None, keep: bool) -> None:
        self.place, self.edit, self.keep = place, edit, keep
        self.value: Tensor | None = None
        self.calls = 0

    def __call__(self, t: Tensor) -> Tensor:
        self.calls += 1
        if self.calls > 1:
            layer, site = self.place
            raise RuntimeError(tr("layer {layer}'s {site} was computed twice in one forward pass; patching needs one "
                                  "tensor per layer and site", layer=layer, site=site))
        if self.edit is not None:
            t = self.edit(t)
        if self.keep:
            self.value = t
        return t

    def kept(self) -> Tensor:
        """The tensor kept in the pass (``forward`` checked first that the pass reached this place)."""
        assert self.value is not None
        return self.value


def _register(pm: Patchable, place: Place, hook: _Place) -> RemovableHandle:
    layer, site = place
    if site == RESIDUAL:
        def residual(module, args, kwargs):
            if args:
                return (hook(args[0]), *args[1:]), kwargs
            return args, {**kwargs, "x": hook(kwargs["x"])}

        return pm.blocks[layer].register_forward_pre_hook(residual, with_kwargs=True)
    module = pm.layers[layer].module(site)
    if site == "output":
        return module.register_forward_pre_hook(lambda m, args: (hook(args[0]), *args[1:]))
    return module.register_forward_hook(lambda m, args, out: hook(out))


def forward(pm: Patchable, inputs: Inputs, edits: Mapping[Place, Edit] | None = None,
            keep: Iterable[Place] = ()) -> tuple[Tensor, dict[Place, Tensor]]:
    """The logits ``(B, T, V)`` of one pass with ``edits`` applied, and the tensors at the places in ``keep``."""
    edits, keep = dict(edits or {}), set(keep)
    hooks = {place: _Place(place, edits.get(place), place in keep) for place in set(edits) | keep}
    handles = []
    try:
        for place, hook in hooks.items():
            handles.append(_register(pm, place, hook))
        logits = pm.run(inputs)
    finally:
        for handle in handles:
            handle.remove()
    missing = [place for place, hook in hooks.items() if hook.calls == 0]
    if missing:
        raise RuntimeError(tr("the forward pass never reached {places}; patching cannot see those activations",
                              places=missing))
    return logits, {place: hooks[place].kept() for place in keep}


def record(pm: Patchable, inputs: Inputs, places: Iterable[Place]) -> dict[Place, Tensor]:
    """The tensors at ``places`` in a plain pass (no edit), detached."""
    _, kept = forward(pm, inputs, keep=places)
    return {place: t.detach() for place, t in kept.items()}


def split_heads(t: Tensor, heads: int) -> Tensor:
    """``(B, T, heads · d)`` -> ``(B, T, heads, d)``."""
    return t.unflatten(-1, (heads, t.shape[-1] // heads))
