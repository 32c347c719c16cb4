"""Direct logit attribution: how much each head, each feed-forward layer and the embeddings write onto the answer.

In a pre-norm model the last residual stream is a sum: the embeddings, plus every attention module's output (each
head's slice of ``out_proj``'s input times its columns of ``out_proj``'s weight, plus the bias), plus every
feed-forward layer's output. The logits read that sum through the final norm and the unembedding. With the norm's
scale held at the value it has at that position (a LayerNorm divides by the standard deviation of the whole stream
there, an RMSNorm by its root mean square), the readout is linear, and each part's share of a logit difference is
its own readout:

    share(part) = mean over the batch of  (g ⊙ P(part) / s) · (W_U^T d)

with ``P`` the LayerNorm's centring (none for an RMSNorm), ``g`` the norm's gain, ``s`` its scale at that position
and ``d`` the answer direction over the vocabulary (+1 on the right token, -1 on the wrong one: logit(right) -
logit(wrong)). The norm's bias and the unembedding's bias are parts of their own; all the parts sum to the whole
(tested). A model whose blocks normalise a sublayer's output before adding it (Gemma's sandwich norms), whose
logits are soft-capped, or whose blocks are post-norm has no such sum, and is refused.

A feed-forward layer's part is what its block adds besides attention: the block's output, minus its input, minus
its attention modules' outputs (read by hooks; the feed-forward module's own name is never needed). A translation
model's heads are its cross-attention's; its masked self-attention is a part per layer of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from attnlab.heads.attention_only import AttentionOnlyTransformer
from attnlab.heads.hooks import as_found
from attnlab.heads.sites import Inputs, Patchable, patchable
from attnlab.i18n import tr
from attnlab.layers import LayerNorm, RMSNorm

#: how far the norm rebuilt from its gain and scale may be from the model's own (float32 rounding is ~1e-7)
NORM_TOLERANCE = 1e-4


@dataclass
class LogitAttribution:
    """The parts of a logit difference at one position (or several), averaged over the batch (and them).

    Attributes:
        total: the model's own value, from its logits.
        heads: ``(num_layers, num_heads)``: each head's part.
        parts: the other parts, by name: ``"embeddings"`` (0-d), ``"attention biases"`` (``(num_layers,)``,
            ``out_proj``'s bias, where it has one), ``"feed-forward"`` (``(num_layers,)``; not in an attention-only
            model), ``"self-attention"`` (``(num_layers,)``, a translation model's), ``"final norm bias"`` and
            ``"unembedding bias"`` (0-d, where the model has them).
    """

    total: Tensor
    heads: Tensor
    parts: dict[str, Tensor] = field(default_factory=dict)

    def sum(self) -> Tensor:
        """Every part added up: equal to :attr:`total` up to rounding."""
        return self.heads.sum() + sum(p.sum() for p in self.parts.values())


def answer_direction(vocab_size: int, right: Tensor | list[int], wrong: Tensor | list[int]) -> Tensor:
    """``(B, vocab_size)``: +1 at each row's right token, -1 at its wrong one (logit(right) - logit(wrong))."""
    right, wrong = torch.as_tensor(right).reshape(-1), torch.as_tensor(wrong).reshape(-1)
    if right.shape != wrong.shape:
        raise ValueError(tr("right and wrong must name one token per row each, got {a} and {b}",
                            a=tuple(right.shape), b=tuple(wrong.shape)))
    for name, ids in (("right", right), ("wrong", wrong)):
        if ((ids < 0) | (ids >= vocab_size)).any():
            raise ValueError(tr("{name}: token ids must be in [0, {vocab_size}), got {ids}", name=name,
                                vocab_size=vocab_size, ids=ids.tolist()))
    d = torch.zeros(len(right), vocab_size)
    rows = torch.arange(len(right))
    d[rows, right] += 1.0
    d[rows, wrong] -= 1.0
    return d


def _readout_problem(pm: Patchable) -> str | None:
    c = pm.model.config
    if getattr(c, "norm", "pre") == "post":
        return tr("its blocks are post-norm (a LayerNorm after each residual addition)")
    if getattr(c, "sandwich_norm", False):
        return tr("its blocks normalise each sublayer's output before adding it (sandwich norms)")
    cap = getattr(c, "final_softcap", None)
    if cap:
        return tr("its logits are soft-capped (final_softcap={cap})", cap=cap)
    if pm.final_norm is not None and not isinstance(pm.final_norm, LayerNorm | RMSNorm | nn.LayerNorm):
        return tr("its final norm is a {norm}, whose scale this does not know", norm=type(pm.final_norm).__name__)
    return None


def _frozen_norm(norm: nn.Module | None, x: Tensor, y: Tensor):
    """The final norm as ``c -> g ⊙ P(c) / s`` with ``s`` held at ``x``'s (``(B, D)`` rows), and its bias; checked
    against the model's own output ``y`` there."""
    if norm is None:
        return (lambda c: c), None
    centred = isinstance(norm, LayerNorm | nn.LayerNorm)
    gain: Tensor
    bias: Tensor | None
    if isinstance(norm, LayerNorm | nn.LayerNorm):
        scale = torch.sqrt(x.var(dim=-1, unbiased=False, keepdim=True) + norm.eps)
        gain, bias = norm.weight, norm.bias
    else:
        assert isinstance(norm, RMSNorm)  # _readout_problem refused every other norm
        scale = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + norm.eps)
        gain, bias = (1.0 + norm.weight if norm.unit_offset else norm.weight), None

    def linear(c: Tensor) -> Tensor:  # (B, D) or (B, N, D)
        s = scale if c.dim() == 2 else scale[:, None]
        return gain * ((c - c.mean(dim=-1, keepdim=True)) if centred else c) / s

    rebuilt = linear(x) + (0 if bias is None else bias)
    if (rebuilt - y).abs().max() > NORM_TOLERANCE * max(1.0, float(y.abs().max())):
        raise RuntimeError(tr("the final norm rebuilt from its gain and scale differs from the model's own by "
                              "{diff:.2e}; direct logit attribution cannot read this norm", diff=float(
                                  (rebuilt - y).abs().max())))
    return linear, bias


def _capture(pm: Patchable, inputs: Inputs) -> tuple[Tensor, dict]:
    """One pass: logits, and block inputs/outputs, mixers' ``out_proj`` inputs/outputs, the final norm's in/out."""
    seen: dict = {}
    handles = []

    def pre(key):
        def hook(m, args, kwargs):
            seen[key] = (args[0] if args else kwargs["x"]).detach()
        return hook

    def post(key, take_input=False):
        def hook(m, args, out):
            seen[key] = (args[0] if take_input else out).detach()
        return hook

    try:
        for i, block in enumerate(pm.blocks):
            handles.append(block.register_forward_pre_hook(pre(("in", i)), with_kwargs=True))
            handles.append(block.register_forward_hook(post(("out", i))))
            for j, m in enumerate(pm.mixers[i]):
                handles.append(m.out_proj.register_forward_hook(post(("z", i, j), take_input=True)))
                handles.append(m.out_proj.register_forward_hook(post(("o", i, j))))
        if pm.final_norm is not None:
            handles.append(pm.final_norm.register_forward_hook(post("norm_in", take_input=True)))
            handles.append(pm.final_norm.register_forward_hook(post("norm_out")))
        logits = pm.run(inputs)
    finally:
        for handle in handles:
            handle.remove()
    return logits.detach(), seen


def logit_attribution(model: nn.Module, inputs: Inputs, direction: Tensor,
                      position: int | Sequence[int] = -1) -> LogitAttribution:
    """Direct logit attribution at ``position`` of ``inputs`` (``(B, T)`` ids, or a translation model's pair).

    Args:
        direction: over the vocabulary, ``(V,)``, ``(B, V)`` or, for several positions, ``(B, P, V)``
            (:func:`answer_direction`).
        position: one position, or ``P`` of them (the value is then their mean too).

    The value attributed is the mean over the rows (and positions) of ``direction · logits[:, position]``.
    """
    pm = patchable(model)
    inputs = pm.check_inputs(inputs)
    problem = _readout_problem(pm)
    if problem is not None:
        raise ValueError(tr("direct logit attribution needs a residual stream that the logits read linearly; "
                            "{model} has none: {problem}", model=type(model).__name__, problem=problem))
    batch, length = pm.batch(inputs), pm.length(inputs, "output")
    positions = [position] if isinstance(position, int) else list(position)
    for p in positions:
        if isinstance(p, bool) or not isinstance(p, int) or not -length <= p < length:
            raise ValueError(tr("position must be in {low}..{high}, got {position!r}", low=-length, high=length - 1,
                                position=p))
    direction = torch.as_tensor(direction, dtype=torch.float32)
    shapes = ((pm.vocab_size,), (batch, pm.vocab_size), (batch, len(positions), pm.vocab_size))
    if direction.shape not in shapes:
        raise ValueError(tr("direction must be ({vocab},), ({batch}, {vocab}) or ({batch}, {count}, {vocab}) over "
                            "the vocabulary, got {shape}", vocab=pm.vocab_size, batch=batch, count=len(positions),
                            shape=tuple(direction.shape)))
    if direction.dim() < 3:
        direction = direction.expand(batch, -1)[:, None].expand(-1, len(positions), -1)
    with as_found(model), torch.no_grad():
        logits, seen = _capture(pm, inputs)
        rows = direction.reshape(-1, pm.vocab_size).to(logits.device, logits.dtype)  # (B · P, V)
        total = (rows * logits[:, positions].flatten(0, 1)).sum(-1).mean()
        at = {key: t[:, positions].flatten(0, 1) for key, t in seen.items()}  # (B · P, D) or (B · P, H · hd)
        last = at[("out", pm.num_layers - 1)]
        linear, norm_bias = _frozen_norm(pm.final_norm, at.get("norm_in", last), at.get("norm_out", last))
        unembed = rows @ pm.unembed.weight  # (B · P, D): the answer direction in the residual stream

        def share(c: Tensor) -> Tensor:  # (N, D) or (N, K, D) -> 0-d or (K,)
            readout = linear(c) * (unembed if c.dim() == 2 else unembed[:, None])
            return readout.sum(-1).mean(0)

        heads, parts = _parts(pm, at, share)
        if norm_bias is not None:
            parts["final norm bias"] = (norm_bias * unembed).sum(-1).mean()
        if getattr(pm.unembed, "bias", None) is not None:
            parts["unembedding bias"] = (rows * pm.unembed.bias).sum(-1).mean()
    return LogitAttribution(total.float(), heads.float(), {k: v.float() for k, v in parts.items()})


def _parts(pm: Patchable, at: dict, share) -> tuple[Tensor, dict[str, Tensor]]:
    """Each head's share, and the per-layer shares of the biases, the other attention and the feed-forward."""
    heads, biases, others, rest = [], [], [], []
    for i, layer in enumerate(pm.layers):
        out_proj = layer.attention.out_proj
        weight = out_proj.weight  # (D, H·hd)
        if not isinstance(weight, Tensor) or weight.dim() != 2:
            raise ValueError(tr("layer {layer}'s out_proj has no plain weight matrix (a quantized model?); direct "
                                "logit attribution needs one", layer=i))
        j = next(k for k, m in enumerate(pm.mixers[i]) if m is layer.attention)
        z = at[("z", i, j)].unflatten(-1, (layer.num_heads, layer.head_dim))  # (B, H, hd)
        per_head = torch.einsum("bhk,dhk->bhd", z, weight.unflatten(1, (layer.num_heads, layer.head_dim)))
        heads.append(share(per_head))
        bias = torch.zeros_like(at[("o", i, j)]) if out_proj.bias is None else out_proj.bias.expand_as(at[("o", i, j)])
        biases.append(share(bias))
        other = sum((at[("o", i, k)] for k in range(len(pm.mixers[i])) if k != j), torch.zeros_like(bias))
        others.append(share(other))
        added = at[("out", i)] - at[("in", i)] - sum(at[("o", i, k)] for k in range(len(pm.mixers[i])))
        rest.append(share(added))
    parts = {"embeddings": share(at[("in", 0)])}
    if any(layer.attention.out_proj.bias is not None for layer in pm.layers):
        parts["attention biases"] = torch.stack(biases)
    if pm.kind == "seq2seq":
        parts["self-attention"] = torch.stack(others)
    if not isinstance(pm.model, AttentionOnlyTransformer):
        parts["feed-forward"] = torch.stack(rest)
    return torch.stack(heads), parts
