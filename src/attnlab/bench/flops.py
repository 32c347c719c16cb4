"""How much arithmetic one multi-head attention forward does.

With ``B`` sequences of ``T`` tokens, width ``d`` and ``h`` heads of ``d_h = d / h``, counting a
multiply-add as 2 floating-point operations:

==================  =====================  ================================================
QKV projections     ``2 · 3 · B · T · d²``  three ``(T, d) @ (d, d)`` products
scores ``Q Kᵀ``     ``2 · B · h · P · d_h``  one dot product of length ``d_h`` per query-key pair
weighted sum        ``2 · B · h · P · d_h``  weights ``@ V``
output projection   ``2 · B · T · d²``      ``out_proj``
==================  =====================  ================================================

``P`` is the number of query-key pairs: ``T²`` without a mask, and for causal attention only the
pairs a query may attend, ``T (T + 1) / 2`` (about half). Causal GFLOP/s
therefore count useful work: a kernel that computes the full ``T²`` and masks half away shows
about half the hardware rate it really runs at. Softmax, scaling and masking (O(T²) but not
multiply-adds) and biases are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.i18n import tr


@dataclass(frozen=True)
class AttentionFlops:
    """FLOPs of one forward pass, by part."""

    qkv: int
    scores: int
    weighted_sum: int
    out_proj: int

    @property
    def total(self) -> int:
        return self.qkv + self.scores + self.weighted_sum + self.out_proj


def attention_flops(batch: int, seq_len: int, d_model: int, num_heads: int, is_causal: bool) -> AttentionFlops:
    """FLOPs of multi-head self-attention with projections (see the module docstring).

    Example:
        >>> attention_flops(8, 256, 512, 8, is_causal=False).total   # the texts' shape
        5368709120
    """
    for name, n in (("batch", batch), ("seq_len", seq_len), ("d_model", d_model), ("num_heads", num_heads)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(tr("attention_flops: {name} must be a positive int, got {n!r}", name=name, n=n))
    if d_model % num_heads:
        raise ValueError(tr("attention_flops: num_heads={num_heads} must divide d_model={d_model}",
                            num_heads=num_heads, d_model=d_model))
    head_dim = d_model // num_heads
    pairs = seq_len * (seq_len + 1) // 2 if is_causal else seq_len * seq_len
    attention = 2 * batch * num_heads * pairs * head_dim
    return AttentionFlops(qkv=2 * 3 * batch * seq_len * d_model**2, scores=attention, weighted_sum=attention,
                          out_proj=2 * batch * seq_len * d_model**2)
