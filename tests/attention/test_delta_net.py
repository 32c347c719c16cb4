"""The linear-attention layers, Gated DeltaNet and Kimi Delta Attention: each equal to transformers' layer (Qwen3.5's,
Kimi Linear's) with the same weights, the same numbers in chunks and token by token, in one call or in pieces through
its cache (the convolution's last inputs and the memory, kept in float32), a left-padded row equal to itself alone,
its implicit attention, its gated norm, and bad input."""

import dataclasses

import pytest
import torch

from attnlab.attention.delta_net import GatedDeltaNet, GatedDeltaNetSpec, GatedRMSNorm, short_convolution
from attnlab.attention.kimi_delta import KimiDeltaAttention, KimiDeltaAttentionSpec
from attnlab.models.caches import RecurrentLayerCache
from attnlab.models.caches.size import State

SPEC = GatedDeltaNetSpec(32, num_key_heads=2, num_value_heads=4, key_head_dim=8, value_head_dim=6, chunk_size=5)
KDA = KimiDeltaAttentionSpec(32, num_heads=2, head_dim=8, chunk_size=5)
SPECS = {"gated-deltanet": SPEC, "kda": KDA}
MEMORY = {"gated-deltanet": (4, 8, 6), "kda": (2, 8, 8)}  # (heads, d_k, d_v) of each memory


def layer(spec=SPEC, seed=0, **changes):
    """Weights of order 1 (std 0.1 would leave the memory near zero): a slip in any piece shows in the outputs."""
    torch.manual_seed(seed)
    spec = dataclasses.replace(spec, **changes)
    module = (GatedDeltaNet if isinstance(spec, GatedDeltaNetSpec) else KimiDeltaAttention)(spec).eval()
    with torch.no_grad():
        for name, p in module.named_parameters():
            gain = name.endswith(("norm.weight", "o_norm.weight"))
            p.copy_(torch.randn_like(p) * (0.3 if p.dim() > 1 and p.shape[0] > 1 else 0.5) + (1.0 if gain else 0.0))
    return module


def x_of(b, t, seed=1):
    return torch.randn(b, t, SPEC.d_model, generator=torch.Generator().manual_seed(seed))


def assert_equal_to(ours, theirs):
    """``theirs`` loads ``ours``' weights by name and shape, and gives its outputs at 3 and 70 tokens (one chunk of
    transformers' 64, and two) within 1e-5 of the largest: float32 rounding, summed in other orders."""
    theirs.load_state_dict(ours.state_dict())
    for t in (3, 70):
        x = x_of(2, t)
        with torch.no_grad():
            want = theirs(x)
            torch.testing.assert_close(ours(x), want, atol=1e-5 * float(want.abs().max()), rtol=0)


def test_gated_deltanet_equals_transformers_qwen3_5_layer_with_the_same_weights():
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    config = transformers.Qwen3_5TextConfig(hidden_size=32, linear_num_key_heads=2, linear_num_value_heads=4,
                                            linear_key_head_dim=8, linear_value_head_dim=6, rms_norm_eps=1e-6)
    assert_equal_to(layer(), Qwen3_5GatedDeltaNet(config, 0).eval())


def test_kda_equals_transformers_kimi_linear_layer_with_the_same_weights():
    transformers = pytest.importorskip("transformers")
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearDeltaAttention

    config = transformers.KimiLinearConfig(hidden_size=32, linear_num_heads=2, linear_head_dim=8, rms_norm_eps=1e-6,
                                           num_hidden_layers=1, layer_types=["linear_attention"])
    assert_equal_to(layer(KDA), KimiLinearDeltaAttention(config, 0).eval())


@pytest.mark.parametrize("kind", SPECS)
@pytest.mark.parametrize("t", [1, 4, 5, 13, 23])
def test_chunked_equals_token_by_token(kind, t):
    chunked, recurrent = layer(SPECS[kind]), layer(SPECS[kind], chunk_size=None)
    x = x_of(2, t)
    with torch.no_grad():
        torch.testing.assert_close(chunked(x), recurrent(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", SPECS)
@pytest.mark.parametrize("pieces", [(9, 1, 1, 1), (1,) * 12, (2, 7, 3), (12,)])
def test_in_pieces_through_the_cache_equals_at_once(kind, pieces):
    """The convolution reads its last K − 1 inputs from the cache, the rule its memory: any split gives the
    same outputs."""
    spec = SPECS[kind]
    module, x = layer(spec), x_of(2, sum(pieces))
    cache = RecurrentLayerCache(2)
    outs, start = [], 0
    with torch.no_grad():
        whole = module(x)
        for n in pieces:
            outs.append(module(x[:, start : start + n], kv_cache=cache))
            start += n
    torch.testing.assert_close(torch.cat(outs, 1), whole, atol=1e-5, rtol=0)
    assert cache.length == sum(pieces) and cache.conv.shape == (2, spec.conv_channels, spec.conv_kernel - 1)
    assert cache.state.shape == (2, *MEMORY[kind]) and cache.state.dtype == torch.float32
    state = State(*spec.memory_shape, conv_channels=spec.conv_channels, conv_kernel=spec.conv_kernel)
    assert cache.nbytes == 2 * state.nbytes(0, torch.float32)  # the cache-size formula, at any length


@pytest.mark.parametrize("kind", SPECS)
def test_a_bfloat16_layer_keeps_its_memory_in_float32(kind):
    module, cache = layer(SPECS[kind]).to(torch.bfloat16), RecurrentLayerCache(1)
    with torch.no_grad():
        module(x_of(1, 7).to(torch.bfloat16), kv_cache=cache)
        before = cache.nbytes
        module(x_of(1, 1, seed=2).to(torch.bfloat16), kv_cache=cache)
    assert cache.state.dtype == torch.float32 and cache.conv.dtype == torch.bfloat16
    spec = SPECS[kind]
    state = State(*spec.memory_shape, conv_channels=spec.conv_channels, conv_kernel=spec.conv_kernel)
    assert cache.nbytes == before == state.nbytes(0, torch.bfloat16)  # the memory float32, the convolution bf16


@pytest.mark.parametrize("kind", SPECS)
def test_a_left_padded_row_computes_what_it_computes_alone(kind):
    module, x = layer(SPECS[kind]), x_of(2, 11)
    mask = torch.ones(2, 11, dtype=torch.long)
    mask[1, :4] = 0
    with torch.no_grad():
        batch = module(x, attention_mask=mask)
        alone = module(x[1:, 4:])
    torch.testing.assert_close(batch[1, 4:], alone[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", SPECS)
def test_the_implicit_attention_is_lower_triangular_and_none_with_a_cache(kind):
    module, x = layer(SPECS[kind]), x_of(1, 9)
    with torch.no_grad():
        out, weights = module(x, return_weights=True)
        _, cached = module(x, return_weights=True, kv_cache=RecurrentLayerCache(1))
    assert weights.shape == (1, MEMORY[kind][0], 9, 9) and cached is None
    torch.testing.assert_close(out, module(x))
    assert torch.equal(weights, weights.tril()) and (weights < 0).any()  # the delta rule erases: negative entries


def test_the_short_convolution_is_causal_and_depthwise():
    conv = torch.nn.Conv1d(3, 3, 4, groups=3, bias=False)
    x = torch.randn(1, 6, 3)
    out, last = short_convolution(x, conv, None)
    want = torch.nn.functional.silu(conv.weight[:, 0].flip(-1)[None, None, :, :].mul(
        torch.nn.functional.pad(x, (0, 0, 3, 0)).unfold(1, 4, 1).flip(-1)).sum(-1))
    torch.testing.assert_close(out, want[0][None], atol=1e-6, rtol=0)
    assert torch.equal(last, x[0, -3:].T[None])


def test_gated_norm_equals_transformers():
    pytest.importorskip("transformers")
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextRMSNormGated

    ours, theirs = GatedRMSNorm(6, 1e-6), Qwen3NextRMSNormGated(6, eps=1e-6)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(6))
        theirs.weight.copy_(ours.weight)
    x, z = torch.randn(3, 6), torch.randn(3, 6)
    torch.testing.assert_close(ours(x, z), theirs(x, z), atol=1e-6, rtol=0)


@pytest.mark.parametrize(("spec", "changes", "message"), [
    (SPEC, {"num_value_heads": 3}, r"num_value_heads must be a multiple of num_key_heads .* got num_value_heads=3, "
                                   r"num_key_heads=2"),
    (SPEC, {"chunk_size": 0}, r"chunk_size"),
    (SPEC, {"eps": 0}, r"eps must be a number > 0, got 0"),
    (SPEC, {"key_head_dim": 0}, r"key_head_dim"),
    (KDA, {"head_dim": 0}, r"KimiDeltaAttentionSpec: head_dim"),
    (KDA, {"chunk_size": -1}, r"chunk_size"),
    (KDA, {"eps": True}, r"eps must be a number > 0, got True"),
])
def test_bad_specs_are_one_line_naming_the_field(spec, changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(spec, **changes)


@pytest.mark.parametrize("kind", SPECS)
def test_bad_calls_are_one_line(kind):
    module = layer(SPECS[kind])
    with pytest.raises(ValueError, match=r"attn_mask must be a bool key padding mask"):
        module(x_of(1, 3), attn_mask=torch.ones(1, 1, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"not both"):
        module(x_of(1, 3), attention_mask=torch.ones(1, 3), attn_mask=torch.ones(1, 1, 1, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"spec must be a"):
        type(module)("spec")
