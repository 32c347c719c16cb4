"""Multi-head latent attention on torch's fused CPU kernel.

MLA's values are narrower than its queries and keys: DeepSeek-V3's heads score with ``nope + rope = 192`` numbers
and read ``v_head_dim = 128``; its absorbed decoding scores with ``kv_lora_rank + rope = 576`` and reads the 512 of
the latent. torch's fused CPU kernel (``F.scaled_dot_product_attention``) takes only values as wide as the queries;
given narrower ones it falls back to its math kernel, which is slower by far (the attention call of a decoding
step of DeepSeek-V3's 128 heads over 1,024 latents, batch 8, one thread: 3.9 s against 0.18 s padded). So on the
CPU the twin pads the values with zero columns up to the queries' width and drops those columns of the result:
each context column is ``Σ_j p_j v_j,c``, and a zero column adds a zero column, nothing else
(tests/fast/test_latent.py: equal to the plain module within float32 rounding).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from attnlab.attention.latent import LatentAttention
from attnlab.attention.sparse import SparseLatentAttention
from attnlab.fast.twins import twin_of


class PaddedValues(LatentAttention):
    """:class:`~attnlab.attention.latent.LatentAttention`'s ``attend`` with the values padded to the queries' width
    on the CPU (the module docstring); everything else the plain module's."""

    def attend(self, queries: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, is_causal: bool,
               return_weights: bool, enable_gqa: bool = False) -> tuple[Tensor, Tensor | None]:
        width, wanted = values.shape[-1], queries.shape[-1]
        if return_weights or not values.is_cpu or width >= wanted:  # the weights come from the math kernel anyway
            return super().attend(queries, keys, values, mask, is_causal, return_weights, enable_gqa)
        context, _ = super().attend(queries, keys, F.pad(values, (0, wanted - width)), mask, is_causal, False,
                                    enable_gqa)
        return context[..., :width], None


class FastLatentAttention(PaddedValues):
    """The fast twin of :class:`~attnlab.attention.latent.LatentAttention` (DeepSeek-V2/V3, Kimi Linear)."""


class FastSparseLatentAttention(PaddedValues, SparseLatentAttention):
    """The fast twin of :class:`~attnlab.attention.sparse.SparseLatentAttention` (DeepSeek-V3.2)."""


#: each kind of latent attention and its twin
TWINS: dict[type[LatentAttention], type[PaddedValues]] = {
    LatentAttention: FastLatentAttention, SparseLatentAttention: FastSparseLatentAttention}


def latent_twin(module: LatentAttention) -> PaddedValues:
    """The fast twin of a latent attention module: its parameters and children shared, not copied."""
    return twin_of(TWINS[type(module)], module)
