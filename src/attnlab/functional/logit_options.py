"""Two changes to the scores before the softmax that today's open models make: soft-capping and sinks.

* Soft-capping (Gemma 2): every score passes through ``cap · tanh(s / cap)`` before the mask, so no score leaves
  ``(-cap, cap)``: a few large logits cannot saturate the softmax (Gemma 2 caps attention at 50 and its final
  logits at 30). Near 0 it is the identity; its slope is ``1 − tanh²(s / cap)``.
* Attention sinks (gpt-oss; Xiao et al., 2023, "Efficient Streaming Language Models with Attention Sinks",
  arXiv:2309.17453, learned instead of a real token): one learned logit per head joins each row's softmax as an
  extra column, and is dropped after it. A head can so put weight "nowhere": the weights on the real keys sum to
  ``1 − exp(sink − lse) < 1``.

        weights = softmax([s_1, ..., s_Tk, sink])[:Tk]

Every backend does sinks; soft-capping needs a backend that computes the scores itself (``math``, ``chunked``,
``flash``): torch's fused kernel cannot, and :func:`~attnlab.functional.backends.choose_backend` knows it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnlab.functional.masks import additive_mask


def softcap(scores: Tensor, cap: float | None) -> Tensor:
    """``cap · tanh(scores / cap)`` (None: the scores as they are). Example: ``softcap(torch.tensor([100.]), 50)``
    is ``50 · tanh(2) ≈ 48.2``."""
    if cap is None:
        return scores
    return torch.tanh(scores / cap) * cap


def check_softcap(softcap_: float | None, name: str = "softcap") -> None:
    """None, or a finite number > 0: a cap ≤ 0 would flip or erase every score."""
    if softcap_ is not None and (isinstance(softcap_, bool) or not isinstance(softcap_, int | float)
                                 or not math.isfinite(softcap_) or softcap_ <= 0):
        raise ValueError(f"{name} must be None or a finite number > 0 (scores become cap · tanh(s / cap)), got "
                         f"{softcap_!r}")


def check_sinks(sinks: Tensor | None, query: Tensor) -> None:
    """None, or a floating tensor ``(H,)``: one logit per query head, ``H = query.shape[-3]``, on query's device."""
    if sinks is None:
        return
    if not isinstance(sinks, Tensor):
        raise TypeError(f"sinks must be a torch.Tensor or None, got {type(sinks).__name__}")
    heads = query.shape[-3] if query.dim() >= 3 else 1
    if not torch.is_floating_point(sinks) or sinks.shape != (heads,):
        raise ValueError(f"sinks must be a floating tensor of shape ({heads},) (one logit per query head of query "
                         f"{tuple(query.shape)}), got {sinks.dtype} of shape {tuple(sinks.shape)}")
    if sinks.device != query.device:
        raise ValueError(f"sinks must be on query's device {query.device}, got {sinks.device}")


def sink_column(sinks: Tensor, like: Tensor) -> Tensor:
    """The sinks as one more column of scores ``like (..., H, Tq, Tk)``: ``(..., H, Tq, 1)``, in like's dtype."""
    heads = like.shape[-3] if like.dim() >= 3 else 1
    return sinks.to(like.dtype).view(heads, 1, 1).expand(*like.shape[:-1], 1)


def softmax_with_sinks(scores: Tensor, sinks: Tensor) -> Tensor:
    """``softmax([scores, sink])`` without the sink's column: ``(..., H, Tq, Tk)``, each row summing to < 1.

    A row whose every score is -inf gets weights 0 (all of it on the sink), never NaN."""
    both = torch.cat((scores, sink_column(sinks, scores)), dim=-1)
    return torch.softmax(both, dim=-1)[..., :-1]


def with_sink_key(key: Tensor, value: Tensor, mask: Tensor | None, sinks: Tensor,
                  query: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Sinks for a kernel that only takes a mask (torch's): one more key, all zeros, whose score ``q · 0`` plus the
    mask's bias ``sink`` is the sink, and whose value, all zeros, adds nothing to the output.

    ``mask`` is already merged with the causal structure (bool, float or None). Returns key and value ``(..., Tk+1,
    D)`` and a float mask ``(..., H, Tq, Tk+1)``.
    """
    zeros = key.new_zeros(*key.shape[:-2], 1, key.shape[-1])
    key, value = torch.cat((key, zeros), dim=-2), torch.cat((value, zeros[..., : value.shape[-1]]), dim=-2)
    t_q, t_k = query.shape[-2], key.shape[-2] - 1
    if mask is None:
        bias = query.new_zeros(1, t_k)
    elif mask.dtype == torch.bool:
        bias = additive_mask(mask, query.dtype)
    else:
        bias = mask.to(query.dtype)
    shape = torch.broadcast_shapes(bias.shape[:-2], query.shape[:-2])
    bias = bias.expand(*shape, t_q, t_k)
    return key, value, torch.cat((bias, sink_column(sinks, bias)), dim=-1)
