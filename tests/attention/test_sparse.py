"""DeepSeek Sparse Attention against transformers' DeepSeek-V3.2 attention with the same weights (the indexer
choosing 5 of 20 keys), equal to dense MLA when index_topk covers every key, ties broken alike in prefill and in
decoding, and what its cache holds."""

import pytest
import torch

from attnlab.attention import LatentAttentionSpec
from attnlab.attention.latent import mla_scale
from attnlab.attention.sparse import SparseAttentionSpec, SparseLatentAttention, top_keys
from attnlab.layers import RotaryEmbedding
from attnlab.models.caches import LatentCache

transformers = pytest.importorskip("transformers")

D, H, RANK, NOPE, ROPE, V, Q_RANK = 32, 4, 12, 8, 6, 10, 20
INDEX = dict(index_n_heads=16, index_head_dim=10)   # 16 heads: a score that is exactly 0 (a tie) is rare


def _ours(index_topk: int, seed: int = 0, **index) -> SparseLatentAttention:
    spec = SparseAttentionSpec(D, H, RANK, NOPE, ROPE, V, q_lora_rank=Q_RANK, scale=mla_scale(NOPE + ROPE),
                               index_topk=index_topk, **{**INDEX, **index})
    torch.manual_seed(seed)
    dsa = spec.build(RotaryEmbedding(ROPE, 64, 10000.0))
    with torch.no_grad():  # weights of order 1, norm gains away from 1, LayerNorm biases away from 0
        for name, p in dsa.named_parameters():
            if p.dim() == 1:
                p.copy_(1 + 0.2 * torch.randn(p.shape) if name.endswith("weight") else 0.1 * torch.randn(p.shape))
            else:
                p.copy_(torch.randn(p.shape) / p.shape[-1] ** 0.5)
    return dsa.eval()


def _x(t: int = 20, seed: int = 1) -> torch.Tensor:
    return torch.randn(2, t, D, generator=torch.Generator().manual_seed(seed))


def test_equals_transformers_with_the_indexer_choosing_fewer_keys():
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import (
        DeepseekV32Attention,
        DeepseekV32RotaryEmbedding,
    )

    ours = _ours(index_topk=5)
    config = transformers.DeepseekV32Config(
        hidden_size=D, num_attention_heads=H, num_key_value_heads=H, kv_lora_rank=RANK, q_lora_rank=Q_RANK,
        qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V, max_position_embeddings=64, index_topk=5,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0), attn_implementation="eager", **INDEX)
    theirs = DeepseekV32Attention(config, layer_idx=0).eval()
    theirs.load_state_dict({k.replace("out_proj", "o_proj"): v for k, v in ours.state_dict().items()}, strict=True)
    x, t = _x(), 20
    positions = torch.arange(t)[None].expand(2, -1)
    causal = torch.zeros(2, 1, t, t).masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(),
                                                 torch.finfo(torch.float32).min)
    with torch.no_grad():
        want = theirs(x, position_embeddings=DeepseekV32RotaryEmbedding(config)(x, positions), attention_mask=causal,
                      position_ids=positions)[0]
        got, weights = ours(x, return_weights=True)
        dense = ours.naive(*_dense_parts(ours, x), None, True)[0]
    assert want.abs().max() > 0.3
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert ((weights > 0).sum(-1) == torch.arange(1, t + 1).clamp(max=5)).all()   # 5 keys a query, fewer early on
    assert (ours.merge(dense, None, None, False, False) - got).abs().max() > 1e-2   # sparse is not dense here


def _dense_parts(mla, x):
    q_nope, q_rope = mla.queries(x, mla.query_latent(x))
    c_kv, k_rope = mla.latents(x)
    q_rope, k_rope = mla.rotate(q_rope, k_rope, torch.arange(x.shape[1]))
    return q_nope, q_rope, c_kv, k_rope


@pytest.mark.parametrize("index_topk", [20, 64])
def test_equals_dense_mla_when_index_topk_covers_every_key(index_topk):
    ours = _ours(index_topk)
    spec = LatentAttentionSpec(D, H, RANK, NOPE, ROPE, V, q_lora_rank=Q_RANK, scale=mla_scale(NOPE + ROPE))
    dense = spec.build(ours.rotary).eval()
    dense.load_state_dict({k: v for k, v in ours.state_dict().items() if not k.startswith("indexer.")})
    padding = torch.ones(2, 20, dtype=torch.bool)
    padding[1, :4] = False
    mask = padding[:, None, None, :]
    with torch.no_grad():
        got, want = ours(_x(), attn_mask=mask), dense(_x(), attn_mask=mask)
    torch.testing.assert_close(got[0], want[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(got[1, 4:], want[1, 4:], atol=1e-6, rtol=0)


def test_ties_choose_the_earlier_keys_in_prefill_and_in_decoding_alike():
    """With the indexer's head weights 0 every score ties at 0: each query attends to its 3 earliest keys, and
    decoding one token at a time (rows of another length) chooses the same ones."""
    ours = _ours(index_topk=3)
    with torch.no_grad():
        ours.indexer.weights_proj.weight.zero_()
        x = _x(12)
        full, weights = ours(x, return_weights=True)
        cache = LatentCache([ours.spec.cache_widths], batch=2)
        steps = [ours(x[:, :4], kv_cache=cache[0])]
        for t in range(4, 12):
            steps.append(ours(x[:, t : t + 1], kv_cache=cache[0]))
    chosen = weights[0, 0] > 0
    assert chosen[:, :3].sum() == 3 + 2 + 1 + 3 * 9 and not chosen[:, 3:].any()   # keys 0, 1, 2 only
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)


def test_top_keys_by_hand():
    scores = torch.tensor([[[0.0, 2.0, 0.0, 1.0, 5.0]]])
    visible = torch.tensor([[[True, True, True, True, False]]])
    assert top_keys(scores, visible, 2).tolist() == [[[False, True, False, True, False]]]   # 5.0 is not visible
    assert top_keys(scores, visible, 3).tolist() == [[[True, True, False, True, False]]]    # the tie: key 0 first


def test_the_cache_equals_recomputation_and_holds_the_indexer_key():
    ours = _ours(index_topk=4)
    x = _x(16)
    cache = LatentCache([ours.spec.cache_widths] * 1, batch=2)
    with torch.no_grad():
        full = ours(x)
        steps = [ours(x[:, :7], kv_cache=cache[0])] + [ours(x[:, t : t + 1], kv_cache=cache[0]) for t in range(7, 16)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)
    assert ours.spec.cache_widths == (RANK, ROPE, 10)                     # latent, rope key, indexer key
    assert cache.filled_nbytes() == 2 * 16 * (RANK + ROPE + 10) * 4


@pytest.mark.parametrize(("changes", "match"), [
    (dict(index_topk=0), r"index_topk must be a positive int, got 0"),
    (dict(q_lora_rank=None), r"q_lora_rank must be set"),
    (dict(index_head_dim=4), r"index_head_dim=4 must be at least qk_rope_head_dim=6"),
])
def test_bad_specs(changes, match):
    fields = dict(q_lora_rank=Q_RANK, index_topk=4, **INDEX)
    with pytest.raises(ValueError, match=match):
        SparseAttentionSpec(D, H, RANK, NOPE, ROPE, V, **{**fields, **changes})
