"""Kimi Linear as a config: KDA and MLA layers mixed as ``layer_types`` says, the MLA layers without RoPE, dense and
mixture-of-experts feed-forwards as ``mlp_layer_types`` / ``first_k_dense_replace`` say (as transformers' layers
decide), its cache (float32 memories in the KDA layers, latents in the MLA ones: the bytes measured equal the formula;
the cache equal to recomputing), the 48B preset's parameter count equal to transformers' on the meta device, and bad
configs."""

import pytest
import torch

from attnlab.attention.kimi_delta import KimiDeltaAttention
from attnlab.attention.latent import LatentAttention
from attnlab.layers.moe import MixtureOfExperts
from attnlab.layers.swiglu import SwiGLU
from attnlab.models.caches import HybridCache, LatentLayerCache, RecurrentLayerCache
from attnlab.models.modern.kimi_linear import KimiLinearConfig, KimiLinearModel

FULL = [4, 8, 12, 16, 20, 24, 27]  # Kimi-Linear-48B's MLA layers, counted from 1


def tiny(seed=0, **changes):
    torch.manual_seed(seed)
    model = KimiLinearModel(KimiLinearConfig.from_preset("tiny", **changes)).eval()
    with torch.no_grad():  # weights of order 0.1, and every 1-D parameter moved off its start
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def test_three_kda_layers_to_one_mla_layer_without_rope():
    model = tiny()
    assert [type(b.attn) for b in model.blocks] == [KimiDeltaAttention] * 3 + [LatentAttention]
    assert model.blocks[3].attn.rotary is None and model.blocks[3].attn.scale == 16 ** -0.5  # 1/√(nope + rope)
    assert type(model.blocks[0].ff) is SwiGLU and all(type(b.ff) is MixtureOfExperts for b in model.blocks[1:])
    router = model.blocks[1].ff.router.spec
    assert (router.scoring, router.topk_method, router.n_group, router.topk_group, router.correction_bias) == \
        ("sigmoid", "noaux_tc", 4, 2, True)


def test_the_mla_layer_sees_no_positions():
    """Without RoPE the full layer attends by content alone: the same keys at other positions give the same output
    for the last query (the KDA layers' order is the only position the model has)."""
    mla = tiny().blocks[3].attn
    x = torch.randn(1, 6, 32)
    with torch.no_grad():
        shifted = mla(x, positions=torch.arange(6) + 100)
        torch.testing.assert_close(mla(x), shifted, atol=1e-6, rtol=0)


@pytest.mark.parametrize(("changes", "dense"), [
    (dict(), (True, False, False, False)),
    (dict(first_k_dense_replace=2), (True, True, False, False)),
    (dict(mlp_layer_types=["sparse", "dense", "sparse", "dense"]), (False, True, False, True)),
    (dict(n_routed_experts=0), (True,) * 4),
])
def test_which_layers_are_dense_as_transformers_decides(changes, dense):
    model = tiny(**changes)
    assert tuple(type(b.ff) is SwiGLU for b in model.blocks) == dense


def test_default_layer_types_are_transformers():
    transformers = pytest.importorskip("transformers")
    for n in (4, 9, 27):
        assert KimiLinearConfig.from_preset("tiny", num_layers=n, layer_types=None).layer_types == \
            transformers.KimiLinearConfig(num_hidden_layers=n).layer_types


@pytest.mark.parametrize("chunk", [4, 64])
def test_the_cache_equals_recomputation_over_more_than_one_chunk(chunk):
    """A prefix of 11 tokens (three chunks of 4), then one token at a time."""
    model = tiny(chunk_size=chunk)
    ids = torch.randint(0, 256, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(ids).logits
        cache = model.new_cache(2)
        steps = [model(ids[:, :11], kv_cache=cache).logits]
        steps += [model(ids[:, t : t + 1], kv_cache=cache).logits for t in range(11, 20)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_cache_holds_what_the_formula_says(dtype):
    """Latents grow by a row per token in the MLA layer; the KDA layers' states keep their bytes (float32)."""
    model = tiny().to(dtype)
    cache = model.new_cache(2)
    assert isinstance(cache, HybridCache)
    assert [type(layer) for layer in cache.layers] == [RecurrentLayerCache] * 3 + [LatentLayerCache]
    ids = torch.randint(0, 256, (2, 12))
    with torch.no_grad():
        model(ids[:, :9], kv_cache=cache)
        states = [layer.nbytes for layer in cache.layers[:3]]
        model(ids[:, 9:], kv_cache=cache)
    assert [layer.nbytes for layer in cache.layers[:3]] == states
    assert all(layer.state.dtype == torch.float32 for layer in cache.layers[:3])
    c = model.config
    assert cache.filled_nbytes() == c.cache_bytes(12, batch=2, dtype=dtype)
    assert c.cache_bytes_per_token(dtype) == (16 + 8) * dtype.itemsize    # one MLA layer's latent and rope key
    cache.reset()
    assert cache.length == 0 and cache.filled_nbytes() == 0


def test_kimi_linear_48b_has_transformers_parameter_count_and_cache_sizes():
    """The preset (moonshotai/Kimi-Linear-48B-A3B-Instruct's config.json) against transformers' Kimi Linear of the same
    config, both on the meta device: 49,122,675,072 parameters."""
    transformers = pytest.importorskip("transformers")
    lists = dict(full_attn_layers=FULL, kda_layers=[i for i in range(1, 28) if i not in FULL])
    with torch.device("meta"):
        ours = KimiLinearModel(KimiLinearConfig.from_preset("kimi-linear-48b-a3b"))
        theirs = transformers.KimiLinearForCausalLM(transformers.KimiLinearConfig(linear_attn_config=lists))
    assert ours.num_parameters() == sum(p.numel() for p in theirs.parameters()) == 49_122_675_072
    c = ours.config
    assert c.layer_types == theirs.config.layer_types
    # 7 MLA layers of 512 + 64 numbers a token in bfloat16; 20 memories of 32 heads × 128 × 128 in float32 and their
    # convolutions' last 3 inputs of 3 · 32 · 128 channels
    assert c.cache_bytes_per_token() == 7 * 576 * 2 == 8064
    assert c.cache_bytes(0) == 20 * (32 * 128 * 128 * 4 + 3 * 32 * 128 * 3 * 2)


@pytest.mark.parametrize(("changes", "message"), [
    (dict(layer_types=["linear_attention"] * 3), r"layer_types must list num_layers=4 entries, each one of "
                                                 r"\('linear_attention', 'full_attention'\)"),
    (dict(layer_types=["linear_attention"] * 3 + ["sliding_attention"]), r"layer_types must list num_layers=4"),
    (dict(mlp_layer_types=["dense"] * 3), r"mlp_layer_types must list num_layers=4 entries, each one of "
                                          r"\('dense', 'sparse'\)"),
    (dict(n_routed_experts=0, mlp_layer_types=["dense", "sparse", "dense", "dense"]),
     r"mlp_layer_types has sparse layers but n_routed_experts=0"),
    (dict(n_routed_experts=6), r"n_routed_experts=6 must be divisible by n_group=4"),
    (dict(topk_group=5), r"topk_group=5 must be at most n_group=4"),
    (dict(num_kv_heads=2), r"num_kv_heads=2 must equal num_heads=4"),
    (dict(linear_head_dim=0), r"linear_head_dim"),
    (dict(chunk_size=0), r"chunk_size"),
    (dict(q_lora_rank=0), r"q_lora_rank"),
    (dict(qk_norm="head"), r"qk_norm='head' is not part of a Kimi Linear model"),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), r"rope_scaling=.* is not part of a Kimi Linear model"),
])
def test_bad_configs_are_one_line_naming_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        KimiLinearConfig.from_preset("tiny", **changes)


def test_a_model_of_another_config_is_refused():
    from attnlab.models import ModernDecoderConfig

    with pytest.raises(TypeError, match=r"KimiLinearModel: config must be a KimiLinearConfig, got ModernDecoderConfig"):
        KimiLinearModel(ModernDecoderConfig.from_preset("tiny"))


def test_the_modules_examples_run():
    import doctest

    import attnlab.models.modern.kimi_linear as module

    assert doctest.testmod(module, extraglobs={"torch": torch}).failed == 0
