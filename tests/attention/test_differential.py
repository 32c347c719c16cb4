"""Differential attention (DiffLlama): the module against the paper's formula written out pair by pair in loops,
its kernel form against its textbook form, its cache against recomputing, and the inputs it refuses.

transformers' own DiffLlama is the reference of the whole model (tests/pretrained/test_diffllama.py)."""

import doctest
import math

import pytest
import torch
import torch.nn.functional as F

import attnlab.attention.differential as differential_module
from attnlab.attention import AttentionSpec
from attnlab.attention.differential import DifferentialAttention, DifferentialAttentionSpec, lambda_init
from attnlab.layers import RotaryEmbedding
from attnlab.models import KVCache


def module(heads=8, kv_heads=4, depth=2, backend="auto", seed=0, **options) -> DifferentialAttention:
    """A differential attention of 32 features with weights of order 1 and λ well away from λ_init."""
    torch.manual_seed(seed)
    spec = DifferentialAttentionSpec(AttentionSpec(32, 32, heads, num_kv_heads=kv_heads, head_dim=8, out_bias=False,
                                                   backend=backend, owner="DifferentialAttention", **options),
                                     depth=depth)
    attn = spec.build(RotaryEmbedding(8, 64))
    with torch.no_grad():
        for name, p in attn.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if name.startswith("lambda") else 32**-0.5))
    return attn.eval()


def written_out(attn: DifferentialAttention, x: torch.Tensor, attention_mask=None) -> torch.Tensor:
    """The paper's formula for each pair p (heads p and p + H/2) in loops, RoPE from transformers' Llama."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    b, t, _ = x.shape
    d, h, hkv = attn.head_dim, attn.num_heads, attn.num_kv_heads
    g = h // hkv
    q = attn.W_query(x).view(b, t, h, d).transpose(1, 2)
    k = attn.W_key(x).view(b, t, hkv, d).transpose(1, 2)
    v = attn.W_value(x).view(b, t, hkv, d).transpose(1, 2)
    cos, sin = attn.rotary.cos_sin(torch.arange(t))
    q, k = apply_rotary_pos_emb(q, k, cos[None], sin[None])
    allowed = torch.ones(t, t).tril().bool().expand(b, t, t).clone()
    if attention_mask is not None:
        allowed &= attention_mask.bool()[:, None, :]
    lam = (torch.exp((attn.lambda_q1 * attn.lambda_k1).sum()) - torch.exp((attn.lambda_q2 * attn.lambda_k2).sum())
           + lambda_init(attn.differential.depth))
    pairs = []
    for p in range(h // 2):
        maps = []
        for head in (p, p + h // 2):
            scores = q[:, head] @ k[:, head // g].transpose(1, 2) / math.sqrt(d)
            maps.append(torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1).nan_to_num())
        j = p // g
        value = torch.cat((v[:, j], v[:, j + hkv // 2]), -1)                # (B, T, 2d)
        out = (maps[0] - lam * maps[1]) @ value
        pairs.append((1 - lambda_init(attn.differential.depth)) * F.rms_norm(out, (2 * d,), eps=attn.eps))
    return attn.out_proj(torch.cat(pairs, -1))


@pytest.mark.parametrize(("heads", "kv_heads"), [(8, 4), (8, 2), (4, 4), (2, 2)])
def test_the_module_is_the_papers_formula_pair_by_pair(heads, kv_heads):
    attn = module(heads, kv_heads)
    x = torch.randn(2, 9, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = written_out(attn, x)
        assert want.std() > 0.1
        torch.testing.assert_close(attn(x), want, atol=1e-5, rtol=0)


def test_a_padding_mask_is_honoured_and_the_kernel_form_is_the_textbook_form():
    x = torch.randn(3, 10, 32, generator=torch.Generator().manual_seed(2))
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, :4] = 0
    mask[2, :7] = 0
    kernel, textbook = module(), module(backend="math")
    with torch.no_grad():
        want = written_out(textbook, x, mask)
        real = mask.bool()
        for attn in (kernel, textbook):
            got = attn(x, attention_mask=mask)
            torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=0)
        q, k, v = kernel.heads(x)
        a = kernel.textbook(q, k, v, None, True)[0]
        torch.testing.assert_close(kernel.two_maps_at_once(q, k, v, None, True), a, atol=1e-6, rtol=0)


def test_the_weights_are_the_differential_map_one_per_pair_its_rows_summing_to_one_minus_lambda():
    attn = module()
    x = torch.randn(2, 7, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out, d = attn(x, return_weights=True)
        lam = attn.lambda_full(torch.float32)
        torch.testing.assert_close(out, attn(x), atol=1e-5, rtol=0)
    assert d.shape == (2, 4, 7, 7)
    assert abs(float(lam) - attn.lambda_init) > 0.05  # the learned part of λ is in play
    torch.testing.assert_close(d.sum(-1), (1 - lam).expand(2, 4, 7), atol=1e-6, rtol=0)
    assert (d < 0).any() and torch.equal(d.triu(1), torch.zeros_like(d))  # negative entries; nothing ahead


def test_a_head_mask_acts_the_same_in_both_forms():
    kernel, textbook = module(), module(backend="math")
    x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(4))
    head_mask = torch.tensor([1.0, 0.0, 0.5, 1.0, 1.0, 1.0, 0.0, 2.0])
    with torch.no_grad():
        a, b = kernel(x, head_mask=head_mask), textbook(x, head_mask=head_mask)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
        assert not torch.allclose(a, kernel(x), atol=1e-3)


@pytest.mark.parametrize("backend", ["auto", "math"])
def test_decoding_with_a_cache_equals_recomputing(backend):
    attn = module(backend=backend)
    x = torch.randn(2, 9, 32, generator=torch.Generator().manual_seed(5))
    cache = KVCache(1, batch=2, num_heads=4, context_length=12, head_dim=8)
    with torch.no_grad():
        full = attn(x)
        steps = [attn(x[:, :5], kv_cache=cache[0], positions=torch.arange(5))]
        cache.advance(5)
        for t in range(5, 9):
            steps.append(attn(x[:, t : t + 1], kv_cache=cache[0], positions=torch.tensor([t])))
            cache.advance(1)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)


def test_lambda_init_follows_the_depth_schedule():
    assert lambda_init(0) == pytest.approx(0.2)
    assert [round(lambda_init(d), 4) for d in (1, 3, 10)] == [0.3555, 0.5561, 0.7701]
    assert lambda_init(60) == pytest.approx(0.8, abs=1e-7)
    assert module(depth=5).lambda_init == pytest.approx(0.8 - 0.6 * math.exp(-1.5))


@pytest.mark.parametrize(("options", "match"), [
    (dict(heads=3, kv_heads=1), r"^DifferentialAttention: differential attention pairs its heads \(h with h \+ H/2\), "
                                r"so num_heads must be even, got num_heads=3$"),
    (dict(heads=6, kv_heads=3), r"so num_kv_heads must be even, got num_kv_heads=3$"),
    (dict(dropout=0.1), r"has no dropout of its weights .* got dropout=0\.1$"),
    (dict(softcap=30.0), r"does not combine with softcap=30\.0$"),
    (dict(depth=-1), r"depth must be the layer's index, an int >= 0, got -1$"),
])
def test_what_it_cannot_be_is_refused_by_name(options, match):
    with pytest.raises(ValueError, match=match):
        module(**options)


def test_it_is_self_attention_only():
    attn = module()
    x = torch.randn(1, 3, 32)
    with pytest.raises(ValueError, match=r"^DifferentialAttention: differential attention is self-attention; give no "
                                         r"memory"):
        attn(x, torch.randn(1, 4, 32))
    with pytest.raises(TypeError, match=r"spec must be a DifferentialAttentionSpec, got AttentionSpec"):
        DifferentialAttention(AttentionSpec(32, 32, 4))


def test_the_docstring_example_runs():
    assert doctest.testmod(differential_module, raise_on_error=False).failed == 0
