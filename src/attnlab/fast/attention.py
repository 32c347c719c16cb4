"""The attention module with the CPU's speed choices: the same arithmetic as
:class:`~attnlab.attention.MultiHeadAttention`, which it is (a subclass sharing the parameters), with two steps
done faster.

* Step 1, the projections: at inference, ``W_query``, ``W_key`` and ``W_value`` as one product over weights stacked
  once and kept (:func:`~attnlab.fast.projections.fused_map`); in training, stacked at each call so that autograd
  flows through them (nanoGPT's ``c_attn``): two kernel calls fewer each way, and x's gradient comes out of one
  matmul instead of three summed (about 2 % of a small GPT's training step on a CPU).
* Step 3, the kernel: a decoding step's few queries on a CPU run :func:`~attnlab.fast.few_queries.few_queries_kernel`
  instead of torch's fused kernel; a half-precision training call over few keys on a CPU is computed in float32
  (:data:`CPU_HALF_BACKWARD_FLOAT32_BELOW`). Everything else is the module's own choice, the backend of its spec.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.attention.multihead import MultiHeadAttention
from attnlab.fast.few_queries import few_queries_kernel
from attnlab.fast.projections import calls_only_forward, fused_map, stack_linears
from attnlab.fast.twins import twin_of
from attnlab.functional.backends import KERNELS
from attnlab.functional.precision import HALF, in_float32

#: Few queries over few keys, the decoding steps :func:`few_queries_kernel` takes on a CPU: at most
#: ``FEW_QUERIES`` queries (one token per row, or a search's beams over their source) and ``FEW_SCORES`` scores per
#: head, or a single query over any number of keys. Not where the keys' batch axes do not fold into one stride (the
#: heads of a sequence projected at this call): the matmuls would copy the keys and the values first, where torch's
#: kernel reads them as they are (612 ms of such copies in a 4.1-4.8 s beam search without the decoding caches).
FEW_QUERIES, FEW_SCORES = 8, 512

#: Below this many keys a half-precision call to torch's fused kernel that will be differentiated on the CPU is
#: computed in float32: its bfloat16 forward + backward took 1.36-2.48x as long as the same call cast to float32 and
#: back at 64-128 keys (head_dim 32 and 64), 0.89-1.14x at 256 and 0.74-0.81x from 512 on
#: (``benchmarks/results/half_backward.md``). The baby preset's compiled step under ``--dtype bf16`` spent 15.8 ms in it
#: (profiled), against 2.6 ms in float32.
CPU_HALF_BACKWARD_FLOAT32_BELOW = 256

_SDPA_IN_FLOAT32 = in_float32(KERNELS["sdpa"].run)


def folds(t: Tensor) -> bool:
    """Whether ``t (..., T, d)``'s batch axes fold into one stride, as a batched matmul takes them without a copy
    (axes of size 1 aside): a contiguous tensor's do, and a cache's filled part; ``(B, T, D)`` viewed as
    ``(B, H, T, D / H)`` does not."""
    expected = None
    for size, stride in zip(reversed(t.shape[:-2]), reversed(t.stride()[:-2]), strict=True):
        if size == 1:
            continue
        if expected is not None and stride != expected:
            return False
        expected = stride * size
    return True


class FastAttention(MultiHeadAttention):
    """:class:`~attnlab.attention.MultiHeadAttention` (or any module built from an ``AttentionSpec``) with fused
    projections and the CPU's decoding kernel; made by :meth:`from_module`, never built afresh."""

    @classmethod
    def from_module(cls, module: MultiHeadAttention) -> FastAttention:
        """A FastAttention sharing ``module``'s parameters, submodules and spec (nothing is copied)."""
        return twin_of(cls, module)

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Step 1 as one product: the stacked weights kept at inference, stacked at each call in training."""
        fused = fused_map(self, self.W_query, self.W_key, self.W_value)
        if fused is not None:
            q_width, kv_width = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
            return fused(x).split((q_width, kv_width, kv_width), dim=-1)
        if self.training and torch.is_grad_enabled() and \
                all(calls_only_forward(m, nn.Linear) for m in (self.W_query, self.W_key, self.W_value)):
            weight, bias = stack_linears(self.W_query, self.W_key, self.W_value)
            q_width, kv_width = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
            return torch.nn.functional.linear(x, weight, bias).split((q_width, kv_width, kv_width), dim=-1)
        return super().project_qkv(x)

    def attend(self, queries: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, is_causal: bool,
               return_weights: bool) -> tuple[Tensor, Tensor | None]:
        """Step 3: a CPU decoding step's few queries by :func:`few_queries_kernel`, a CPU half-precision training
        call over few keys through float32, anything else as the spec says."""
        if queries.is_cpu and self.backend == "auto" and not return_weights:
            t_q, t_k = queries.shape[-2], keys.shape[-2]
            if not self.training and (t_q == 1 or (t_q <= FEW_QUERIES and t_q * t_k <= FEW_SCORES and folds(keys))):
                return few_queries_kernel(queries, keys, values, attn_mask=mask, is_causal=is_causal,
                                          scale=queries.shape[-1] ** -0.5 if self.scale is None else self.scale,
                                          groups=self.num_heads // self.num_kv_heads, softcap=self.softcap,
                                          sinks=self.sinks)
            if (t_k < CPU_HALF_BACKWARD_FLOAT32_BELOW and torch.is_grad_enabled() and queries.requires_grad
                    and self.softcap is None and _half(queries)):
                return _SDPA_IN_FLOAT32(queries, keys, values, attn_mask=mask, is_causal=is_causal,
                                        dropout_p=self.dropout.p if self.training else 0.0,
                                        scale=queries.shape[-1] ** -0.5 if self.scale is None else self.scale,
                                        groups=self.num_heads // self.num_kv_heads, return_weights=False, softcap=None,
                                        sinks=self.sinks)
        return super().attend(queries, keys, values, mask, is_causal, return_weights)


def _half(queries: Tensor) -> bool:
    """Whether the call computes in a half dtype: the queries', or autocast's on the CPU."""
    return queries.dtype in HALF or (torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") in HALF)
