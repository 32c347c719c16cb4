"""DeepSeek Sparse Attention, DSA (DeepSeek-V3.2): multi-head latent attention in which each query attends to the
``index_topk`` keys a small, cheap *lightning indexer* ranks highest, not to every key before it.

The indexer has heads of its own (``index_n_heads`` of ``index_head_dim``), a query made from MLA's query latent and
one key per token shared by its heads; its score of key ``j`` for query ``i`` is a weighted sum of ReLU'd dot
products, the weights read from the token itself:

    q_I     = W_qI c_q                     (B, T, n, d)    from MLA's query latent c_q
    k_I     = LayerNorm(W_kI x)            (B, L, d)       one key per token, cached beside the latent
    q_I, k_I: RoPE on their first qk_rope_head_dim features (rotate-half, not MLA's interleaved pairs)
    w       = W_w x · n^(-1/2)             (B, T, n)       each head's weight, per query token
    I[i, j] = Σ_h w[i, h] · ReLU(q_I[i, h] · k_I[j] · d^(-1/2))
    chosen  = the index_topk keys j ≤ i with the highest I[i, j]
    out     = MLA(x) with every other key masked

So the attention costs ``index_topk`` keys a query however long the context (DeepSeek-V3.2: 2,048), while the
indexer, with its few small heads, still looks at all of them. Where ``index_topk`` is at least the number of keys
a query sees, every key is chosen and DSA is MLA itself (tests/attention/test_sparse.py).

**Ties.** Scores that tie (ReLU makes every all-negative sum an exact 0) are broken by position, the earlier key
first, by a stable sort of each query's visible scores: the same keys in prefill, where a query's row also holds
the masked later keys, and in decoding, where it holds only the keys so far. (``torch.topk`` does not promise an
order among ties, so a row of another length could choose another of them.)

The cache of a sparse layer keeps the indexer's key beside MLA's latent and rope key: ``kv_lora_rank +
qk_rope_head_dim + index_head_dim`` numbers per token (DeepSeek-V3.2: 512 + 64 + 128 = 704).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnlab.arguments import check_positive_int
from attnlab.attention.checks import as_batched
from attnlab.attention.latent import LatentAttention, LatentAttentionSpec, LatentLayerCache
from attnlab.attention.multihead import RotaryLike
from attnlab.functional import and_masks


@dataclass(frozen=True)
class SparseAttentionSpec(LatentAttentionSpec):
    """DeepSeek Sparse Attention: a :class:`LatentAttentionSpec` (with a query latent) and its lightning indexer.

    Attributes:
        index_n_heads: the indexer's heads (DeepSeek-V3.2: 64).
        index_head_dim: their width, the shared key's too (128); at least ``qk_rope_head_dim`` (RoPE turns the
            first ``qk_rope_head_dim`` features).
        index_topk: the keys each query attends to (2,048), > 0.
    """

    index_n_heads: int = 64
    index_head_dim: int = 128
    index_topk: int = 2048

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = self.owner
        for name in ("index_n_heads", "index_head_dim", "index_topk"):
            check_positive_int(owner, name, getattr(self, name))
        if self.q_lora_rank is None:
            raise ValueError(f"{owner}: the lightning indexer reads the query latent: q_lora_rank must be set, "
                             "got None")
        if self.index_head_dim < self.qk_rope_head_dim:
            raise ValueError(f"{owner}: index_head_dim={self.index_head_dim} must be at least "
                             f"qk_rope_head_dim={self.qk_rope_head_dim} (RoPE turns that many of its features)")

    @property
    def cache_widths(self) -> tuple[int, ...]:
        """The latent's, the rope key's and the indexer key's numbers per token."""
        return (self.kv_lora_rank, self.qk_rope_head_dim, self.index_head_dim)

    def build(self, rotary: RotaryLike | None = None) -> SparseLatentAttention:
        return SparseLatentAttention(self, rotary)


class LightningIndexer(nn.Module):
    """The indexer of DSA: ``wq_b`` (query latent -> ``n · d``), ``wk`` (``d_model -> d``), ``k_norm``
    (a LayerNorm of ``d``), ``weights_proj`` (``d_model -> n``), transformers' names."""

    def __init__(self, spec: SparseAttentionSpec) -> None:
        super().__init__()
        assert spec.q_lora_rank is not None
        self.n, self.d, self.rope = spec.index_n_heads, spec.index_head_dim, spec.qk_rope_head_dim
        self.wq_b = nn.Linear(spec.q_lora_rank, self.n * self.d, bias=False)
        self.wk = nn.Linear(spec.d_model, self.d, bias=False)
        self.k_norm = nn.LayerNorm(self.d, eps=1e-6)
        self.weights_proj = nn.Linear(spec.d_model, self.n, bias=False)

    def rotate(self, x: Tensor, rotary: RotaryLike | None, positions: Tensor, heads: bool) -> Tensor:
        """RoPE (rotate-half) on the first ``qk_rope_head_dim`` features of ``x (B, n, T, d)`` (``heads``) or
        ``(B, T, d)``."""
        if rotary is None:
            return x
        turned, kept = x.split([self.rope, self.d - self.rope], dim=-1)
        turned = turned if heads else turned[:, None]
        turned = rotary.apply(turned, turned, positions)[0]
        return torch.cat([turned if heads else turned[:, 0], kept], dim=-1)

    def key(self, x: Tensor, rotary: RotaryLike | None, positions: Tensor) -> Tensor:
        """``x (B, T, d_model)`` -> each token's indexer key ``(B, T, d)``, normalised and rotated (cached)."""
        return self.rotate(self.k_norm(self.wk(x)), rotary, positions, heads=False)

    def scores(self, x: Tensor, c_q: Tensor, keys: Tensor, rotary: RotaryLike | None, positions: Tensor) -> Tensor:
        """``I (B, T, L)``: ``Σ_h w[i, h] · ReLU(q_I[i, h] · k_I[j] / √d)`` for the queries of ``x (B, T, d_model)``
        (query latent ``c_q (B, T, q_lora_rank)``) against ``keys (B, L, d)``, in float32."""
        b, t, _ = x.shape
        q = self.wq_b(c_q).view(b, t, self.n, self.d).transpose(1, 2)          # (B, n, T, d)
        q = self.rotate(q, rotary, positions, heads=True)
        per_head = torch.relu(q.float() @ keys.float()[:, None].transpose(-1, -2) * self.d ** -0.5)  # (B, n, T, L)
        w = self.weights_proj(x).float() * self.n ** -0.5                        # (B, T, n)
        return torch.einsum("bth,bhtl->btl", w, per_head)


def top_keys(scores: Tensor, visible: Tensor, k: int) -> Tensor:
    """bool ``(B, T, L)``: for each query, the ``k`` visible keys of highest ``scores (B, T, L)`` (all of them if it
    sees at most ``k``), ties to the earlier key (a stable sort: the same choice whatever the row's length)."""
    ranked = scores.masked_fill(~visible, float("-inf")).sort(dim=-1, descending=True, stable=True).indices
    chosen = torch.zeros_like(visible).scatter_(-1, ranked[..., :k], True)
    return chosen & visible


class SparseLatentAttention(LatentAttention):
    """DeepSeek Sparse Attention: :class:`~attnlab.attention.latent.LatentAttention` over the keys its
    ``indexer`` (:class:`LightningIndexer`) chooses; called as it is, ``(B, T, d_model)`` -> ``(B, T, d_model)``
    (with ``return_weights`` the weights ``(B, H, T, L)``, 0 at the keys not chosen). With a cache each layer keeps
    the indexer's key beside the latent (:class:`~attnlab.models.caches.LatentCache`)."""

    #: the kind of attention this is, not one softmax over every visible key (``attnlab.inspect.capture`` names it)
    not_one_softmax: ClassVar[str] = "sparse"

    def __init__(self, spec: SparseAttentionSpec, rotary: RotaryLike | None = None) -> None:
        super().__init__(spec, rotary)
        self.indexer = LightningIndexer(spec)
        self.index_topk = spec.index_topk

    def forward(self, x: Tensor, *, attn_mask: Tensor | None = None, positions: Tensor | None = None,
                return_weights: bool = False, kv_cache: LatentLayerCache | None = None,
                head_mask: Tensor | None = None):
        x, unbatched = as_batched(x, self.spec.d_model, type(self).__name__)   # (B, T, d_model)
        b, t, _ = x.shape
        c_q = self.query_latent(x)
        assert c_q is not None                                                # the spec asks for a query latent
        q_nope, q_rope = self.queries(x, c_q)
        c_kv, k_rope = self.latents(x)
        if positions is None:
            positions = torch.arange(t, device=x.device) if kv_cache is None else kv_cache.positions(t)
        q_rope, k_rope = self.rotate(q_rope, k_rope, positions)
        index_keys: Tensor | None = self.indexer.key(x, self.rotary, positions)   # (B, T, index_head_dim)
        form = self.naive
        if kv_cache is not None:
            c_kv, k_rope, index_keys = kv_cache.update(c_kv, k_rope, index_keys)
            form = self.absorbed
        assert index_keys is not None
        length = c_kv.shape[1]
        mask, _ = self.visible(attn_mask, t, length, kv_cache)
        causal = torch.ones(t, length, dtype=torch.bool, device=x.device).tril(length - t)   # bottom-right
        seen = and_masks(mask, causal)                                         # what each query may see
        assert seen is not None
        visible = seen.expand(b, 1, t, length)[:, 0]                           # (B, T, L): the heads see alike
        scores = self.indexer.scores(x, c_q, index_keys, self.rotary, positions)
        chosen = top_keys(scores, visible, self.index_topk)[:, None]           # (B, 1, T, L)
        context, weights = form(q_nope, q_rope, c_kv, k_rope, chosen, False, return_weights)
        return self.merge(context, weights, head_mask, unbatched, return_weights)
