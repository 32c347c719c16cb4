"""Multi-head latent attention: the textbook form against transformers' DeepSeek-V2 and V3 attention with the same
weights (with and without a query latent, both rotary layouts, YaRN with DeepSeek's mscale), the absorbed form
against the textbook one, the latent cache against recomputation, and what the cache holds."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.attention import LatentAttention, LatentAttentionSpec
from attnlab.attention.latent import mla_scale
from attnlab.layers import RotaryEmbedding
from attnlab.models.caches import LatentCache

transformers = pytest.importorskip("transformers")

D, H, RANK, NOPE, ROPE, V, Q_RANK = 32, 4, 12, 8, 6, 10, 20
YARN = dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=16, mscale=0.707,
            mscale_all_dim=1.0, beta_fast=32.0, beta_slow=1.0)


def _ours(q_lora_rank=Q_RANK, rope_interleave=True, rope_parameters=None, seed=0) -> LatentAttention:
    scaling = None
    if rope_parameters and rope_parameters["rope_type"] != "default":
        scaling = {k: v for k, v in rope_parameters.items() if k != "rope_theta"}
    base = (rope_parameters or {}).get("rope_theta", 10000.0)
    spec = LatentAttentionSpec(D, H, RANK, NOPE, ROPE, V, q_lora_rank=q_lora_rank, rope_interleave=rope_interleave,
                               scale=mla_scale(NOPE + ROPE, scaling))
    torch.manual_seed(seed)
    mla = spec.build(RotaryEmbedding(ROPE, 64, base, scaling))
    with torch.no_grad():  # weights of order 1, norm gains away from 1
        for name, p in mla.named_parameters():
            p.copy_(1 + 0.2 * torch.randn(p.shape) if "norm" in name else torch.randn(p.shape) / p.shape[-1] ** 0.5)
    return mla.eval()


def _theirs(ours: LatentAttention, family: str, rope_parameters=None):
    rope_parameters = rope_parameters or dict(rope_type="default", rope_theta=10000.0)
    config_class = {"v3": transformers.DeepseekV3Config, "v2": transformers.DeepseekV2Config}[family]
    extra = dict(rope_interleave=ours.spec.rope_interleave) if family == "v3" else {}
    config = config_class(hidden_size=D, num_attention_heads=H, num_key_value_heads=H, kv_lora_rank=RANK,
                          q_lora_rank=ours.spec.q_lora_rank, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE,
                          v_head_dim=V, max_position_embeddings=64, rope_parameters=rope_parameters,
                          attn_implementation="eager", **extra)
    if family == "v3":
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
            DeepseekV3Attention as Attention,
        )
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
            DeepseekV3RotaryEmbedding as Rotary,
        )
    else:
        from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2Attention as Attention
        from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2RotaryEmbedding as Rotary
    theirs = Attention(config, layer_idx=0).eval()
    state = {k.replace("out_proj", "o_proj"): v for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state, strict=True)
    return theirs, Rotary(config)


def _float_mask(padding: torch.Tensor, t: int) -> torch.Tensor:
    """transformers' eager mask ``(B, 1, T, T)``: 0 where a query may attend, the dtype's minimum elsewhere."""
    allowed = torch.ones(t, t, dtype=torch.bool).tril() & padding.bool()[:, None, None, :]
    return torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)


CASES = [("v3", Q_RANK, True, None), ("v3", None, True, None), ("v3", Q_RANK, False, None), ("v3", Q_RANK, True, YARN),
         ("v2", Q_RANK, True, None), ("v2", None, True, YARN)]


@pytest.mark.parametrize(("family", "q_lora_rank", "interleave", "rope"), CASES)
def test_textbook_form_equals_transformers(family, q_lora_rank, interleave, rope):
    ours = _ours(q_lora_rank, interleave, rope)
    theirs, rotary = _theirs(ours, family, rope)
    t = 20                                                        # past YaRN's original 16 positions
    x = torch.randn(2, t, D, generator=torch.Generator().manual_seed(1))
    padding = torch.ones(2, t, dtype=torch.long)
    padding[1, :5] = 0                                            # row 1 left-padded
    positions = (padding.cumsum(-1) - 1).clamp(min=0)            # each row's real tokens from 0
    with torch.no_grad():
        want = theirs(x, position_embeddings=rotary(x, positions), attention_mask=_float_mask(padding, t))[0]
        got = ours(x, attn_mask=padding.bool()[:, None, None, :], positions=positions)
    assert want[:, 5:].abs().max() > 0.3
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(got[1, 5:], want[1, 5:], atol=1e-5, rtol=0)   # the padded queries see nothing


def test_the_yarn_scale_is_deepseeks():
    # 1/√(nope + rope) · (0.1 · mscale_all_dim · ln(factor) + 1)²: the softmax is sharpened, not only cos and sin
    import math
    assert _ours(rope_parameters=YARN).scale == pytest.approx((NOPE + ROPE) ** -0.5 * (0.1 * math.log(4) + 1) ** 2)
    assert mla_scale(192, {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0}) == \
        pytest.approx(192 ** -0.5 * (0.1 * math.log(40) + 1) ** 2)
    assert mla_scale(192, {"type": "yarn", "factor": 40}) == 192 ** -0.5   # no mscale_all_dim: the plain scale


def _parts(mla: LatentAttention, x: torch.Tensor):
    positions = torch.arange(x.shape[1])
    q_nope, q_rope = mla.queries(x, mla.query_latent(x))
    c_kv, k_rope = mla.latents(x)
    q_rope, k_rope = mla.rotate(q_rope, k_rope, positions)
    return q_nope, q_rope, c_kv, k_rope


@settings(max_examples=20, deadline=None)
@given(t=st.integers(1, 12), q_lora=st.booleans(), padded=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_absorbed_equals_textbook(t, q_lora, padded, seed):
    mla = _ours(Q_RANK if q_lora else None, seed=seed)
    x = torch.randn(2, t, D, generator=torch.Generator().manual_seed(seed))
    mask = torch.ones(2, 1, 1, t, dtype=torch.bool)
    mask[1, ..., : min(padded, t - 1)] = False
    with torch.no_grad():
        parts = _parts(mla, x)
        naive, w_naive = mla.naive(*parts, mask, True, return_weights=True)
        absorbed, w_absorbed = mla.absorbed(*parts, mask, True, return_weights=True)
    torch.testing.assert_close(absorbed, naive, atol=1e-5, rtol=0)
    torch.testing.assert_close(w_absorbed, w_naive, atol=1e-6, rtol=0)


def test_cache_equals_recomputation():
    mla = _ours(rope_parameters=YARN)
    x = torch.randn(2, 24, D, generator=torch.Generator().manual_seed(2))
    cache = LatentCache([mla.spec.cache_widths], batch=2)
    with torch.no_grad():
        whole = mla(x)
        chunks = [mla(x[:, :10], kv_cache=cache[0])]               # a prompt, then token by token
        chunks += [mla(x[:, i : i + 1], kv_cache=cache[0]) for i in range(10, 24)]
    torch.testing.assert_close(torch.cat(chunks, dim=1), whole, atol=1e-5, rtol=0)
    assert cache.length == 24


def test_cache_holds_the_latent_and_the_rope_key_only():
    mla = _ours()
    cache = LatentCache([mla.spec.cache_widths] * 3, batch=2)       # three layers
    x = torch.randn(2, 7, D)
    with torch.no_grad():
        for layer in cache.layers:
            mla(x, kv_cache=layer)
        want_latent, want_rope = mla.latents(x)
        want_rope = mla.rotate(torch.zeros(2, H, 7, ROPE), want_rope, torch.arange(7))[1]
    # (kv_lora_rank + qk_rope_head_dim) numbers per token per layer, float32: 2 rows · 7 tokens · 3 layers · 18 · 4
    assert cache.per_token_numbers() == 3 * (RANK + ROPE)
    assert cache.filled_nbytes() == 2 * 7 * 3 * (RANK + ROPE) * 4
    latent, rope_key = cache[0].buffer[:, :7].split([RANK, ROPE], -1)
    torch.testing.assert_close(latent, want_latent)
    torch.testing.assert_close(rope_key, want_rope)               # stored rotated, at its own position


def test_weights_are_a_distribution_over_the_keys_seen():
    mla = _ours()
    with torch.no_grad():
        weights = mla(torch.randn(1, 6, D), return_weights=True)[1]
    assert weights.shape == (1, H, 6, 6) and torch.all(weights.triu(1) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, H, 6))


@pytest.mark.parametrize(("changes", "match"), [
    ({"qk_rope_head_dim": 5}, r"qk_rope_head_dim must be even"),
    ({"kv_lora_rank": 0}, r"kv_lora_rank must be a positive int, got 0"),
    ({"q_lora_rank": -3}, r"q_lora_rank must be a positive int, got -3"),
    ({"scale": 0.0}, r"scale must be a finite number > 0, got 0.0"),
    ({"backend": "fast"}, r"backend must be one of"),
])
def test_bad_specs(changes, match):
    with pytest.raises(ValueError, match=match):
        LatentAttentionSpec(**{**dict(d_model=D, num_heads=H, kv_lora_rank=RANK, qk_nope_head_dim=NOPE,
                                      qk_rope_head_dim=ROPE, v_head_dim=V), **changes})


def test_rotary_of_another_width_is_refused():
    spec = LatentAttentionSpec(D, H, RANK, NOPE, ROPE, V)
    with pytest.raises(ValueError, match=r"rotary must rotate heads of width qk_rope_head_dim=6, got one for "
                                         r"head_dim=8"):
        spec.build(RotaryEmbedding(8, 64))
