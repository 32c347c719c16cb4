"""One head, step by step, for one query token: the numbers of the texts' worked example of "爱", from the model.

    x → q = x·W_q (+ b) → [RoPE: q turned by its position] → s_j = q·k_j → s_j · scale (÷√d_k) → mask
      → a = softmax(s) → z = Σ_j a_j v_j → the head's share of out_proj, W_o[:, head] · z

:func:`attnlab.inspect.capture` runs the model's forward once and records every layer's input, queries, keys,
values and context vectors (for a translation model's cross-attention, :func:`~attnlab.inspect.explain_cross`);
:func:`attnlab.inspect.explain` works the arithmetic through for one query and checks it against the weights the
model computed. Two more forward hooks per layer record what the texts show besides: ``x·W_q`` before RoPE turns
it, and ``out_proj``'s output, which the heads' shares and its bias add up to. Each check is a ``max |Δ|``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from attnlab.explore.entry import Entry, Tokens
from attnlab.inspect import Capture, Explanation, capture, explain, explain_cross
from attnlab.layers.rotary import apply_rotary
from attnlab.models import Transformer


@dataclass
class Study:
    """What one forward pass recorded for the steps: the capture, and per layer ``x·W_q`` ``(T, H·d)`` and
    ``out_proj``'s output ``(T, D)``."""

    cap: Capture
    projected: list[Tensor]
    out: list[Tensor]


class _Hooks:
    """Forward hooks on the ``W_query`` and ``out_proj`` of ``modules``: input and output of each, per layer."""

    def __init__(self, modules: list[Any]) -> None:
        self.seen: list[dict[str, Tensor]] = [{} for _ in modules]
        self.handles = []
        for record, module in zip(self.seen, modules, strict=True):
            for part in ("W_query", "out_proj"):
                self.handles.append(getattr(module, part).register_forward_hook(self._keep(record, part)))

    @staticmethod
    def _keep(record: dict[str, Tensor], part: str):
        def hook(_module, args, out):
            record[part + ".in"] = args[0].detach()[0].double()
            record[part] = out.detach()[0].double()
        return hook

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


@torch.no_grad()
def study(entry: Entry, tokens: Tokens) -> Study:
    """Capture ``entry``'s model on ``tokens`` (a decoder or the encoder), with the extra hooks."""
    hooks = _Hooks(entry.attention_modules())
    try:
        cap = capture(entry.model, list(tokens.ids), tokens=list(tokens.tokens), qkv=True, name=entry.name)
    finally:
        hooks.remove()
    return Study(cap, [r["W_query"] for r in hooks.seen], [r["out_proj"] for r in hooks.seen])


def head_steps(entry: Entry, found: Study, layer: int, head: int, query: int) -> dict[str, Any]:
    """The steps of ``head`` of ``layer`` for query token ``query`` (a decoder or the encoder)."""
    e = explain(found.cap, query, layer, head)
    module = entry.attention_modules()[layer]
    assert found.cap.inputs is not None and found.cap.contexts is not None  # study captures with qkv=True
    return _steps(entry, e, module, found.cap.inputs[layer][query].double(), found.projected[layer][query],
                  found.cap.contexts[layer][:, query], found.out[layer][query])


@torch.no_grad()
def cross_steps(entry: Entry, source: Tokens, target: Tokens, layer: int, head: int, query: int) -> dict[str, Any]:
    """A translation model's cross-attention, step by step: decoder step ``query`` (0 reads ``<bos>``) reading
    the source."""
    module = entry.attention_modules("cross")[layer]
    hooks = _Hooks([module])
    try:
        text = entry.tokenizer.decode(list(source.ids))
        assert isinstance(entry.model, Transformer)  # cross-attention: a translation model
        e = explain_cross(entry.model, entry.tokenizer, text, list(target.ids[1:]), query, layer, head,
                          name=entry.name)
    finally:
        hooks.remove()
    seen, h = hooks.seen[0], module.num_heads
    contexts = seen["out_proj.in"].view(seen["out_proj.in"].shape[0], h, -1).transpose(0, 1)  # (H, T, d)
    steps = _steps(entry, e, module, seen["W_query.in"][query], seen["W_query"][query], contexts[:, query],
                   seen["out_proj"][query])
    # the page's rows are the decoder's input (<bos>, then the target so far), its columns the source's tokens
    return {**steps, "query_token": target.tokens[query], "tokens": list(source.tokens)}


def _steps(entry: Entry, e: Explanation, module: Any, x: Tensor, projected: Tensor, contexts: Tensor,
           out: Tensor) -> dict[str, Any]:
    """The answer of ``POST /api/head`` from an explanation and the hooks' numbers: ``projected (H·d,)``
    ``x·W_q`` of every head, ``contexts (H, d)`` every head's ``z`` as the model computed it, ``out (D,)``."""
    h, d, contexts = e.head, e.query.shape[-1], contexts.double()
    weight = module.out_proj.weight.detach().double()  # (D, H·d)
    shares = torch.stack([weight[:, i * d:(i + 1) * d] @ contexts[i] for i in range(contexts.shape[0])])
    bias = module.out_proj.bias
    total = shares.sum(0) + (0 if bias is None else bias.detach().double())
    own = projected[h * d:(h + 1) * d]
    rope = _rope(module, e.query_index, len(e.tokens), e.query, own)
    steps = e.to_dict()
    return {
        "layer": e.layer, "head": h, "query": e.query_index, "query_token": e.query_token, "tokens": e.tokens,
        "d_k": d, "scale": e.scale, "softcap": e.softcap, "sink": e.sink, "kv_head": h // _group(module),
        "x": x.tolist(), "xw": own.tolist(), "rope": rope, "q": steps["q"], "keys": steps["keys"],
        "values": steps["values"], "scores": steps["raw_scores"], "scaled": steps["scaled_scores"],
        "allowed": e.allowed, "weights": steps["weights"], "context": steps["context"],
        "share": shares[h].tolist(), "out": out.tolist(), "bias": None if bias is None else bias.tolist(),
        "check": {"weights": e.max_abs_diff_weights, "context": e.max_abs_diff_context,
                  "out_proj": float((total - out).abs().max()),
                  "rope": None if rope is None else rope["check"]},
    }


def _group(module: Any) -> int:
    return getattr(module, "group_size", 1)


def _rope(module: Any, position: int, length: int, q: Tensor, projected: Tensor) -> dict[str, Any] | None:
    """RoPE for the query at ``position`` of ``length``: the angles ``position · ω_j`` of its ``d/2`` pairs
    ``(j, j + d/2)``, the query before the turn (the scored ``q`` turned back, so a QK-norm in between is included)
    and ``check``: how far that is from ``x·W_q`` where nothing sits in between (None where a QK-norm does)."""
    rotary = getattr(module, "rotary", None)
    if rotary is None:
        return None
    cos, sin = rotary.cos_sin(torch.arange(length))  # (T, d) as the forward pass made them, attention factor in
    factor = rotary.attention_factor
    turned = apply_rotary(q.float()[None, None, None], cos[position:position + 1], -sin[position:position + 1])
    before = turned[0, 0, 0].double() / factor**2  # the turn back by −θ, and the factor of both turns out
    angles = position * rotary.inv_freq(length).double()  # the length matters to dynamic scaling alone
    check = None if getattr(module, "qk_norm", None) else float((before - projected).abs().max())
    return {"position": position, "angles": angles.tolist(), "before": before.tolist(), "factor": factor,
            "check": check}
