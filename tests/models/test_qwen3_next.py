"""Qwen3-Next and Qwen3.5 (text) as a config: the 3:1 hybrid of Gated DeltaNet and gated attention layers, its
cache (keys and values in the full layers, a fixed float32 memory in the linear ones: the bytes measured equal the
formula), the preset's parameter count equal to transformers' on the meta device, and bad configs."""

import pytest
import torch

from attnlab.attention.delta_net import GatedDeltaNet
from attnlab.attention.multihead import MultiHeadAttention
from attnlab.layers.partial_rotary import PartialRotaryEmbedding
from attnlab.models.caches import HybridCache, LayerKVCache, RecurrentLayerCache
from attnlab.models.modern.hybrid import HybridDecoder
from attnlab.models.modern.qwen3_next import Qwen3NextConfig


def tiny(seed=0, **changes):
    torch.manual_seed(seed)
    model = HybridDecoder(Qwen3NextConfig.from_preset("tiny", **changes)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def test_three_linear_layers_to_one_gated_attention_layer():
    model = tiny()
    assert model.config.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    assert all(type(b.attn) is GatedDeltaNet for b in model.blocks[:3])
    full = model.blocks[3].attn
    assert isinstance(full, MultiHeadAttention) and full.spec.output_gate and full.spec.qk_norm == "head"
    assert isinstance(full.rotary, PartialRotaryEmbedding) and full.rotary.rotary_dim == 2  # a quarter of 8
    assert model.blocks[0].norm1.unit_offset  # (1 + w) RMSNorm


def test_the_output_gate_multiplies_each_heads_context_by_a_sigmoid_of_the_input():
    """W_gate = 0: every gate σ(0) = ½, so the layer gives half of what the same layer without a gate gives."""
    full = tiny().blocks[3].attn
    ungated = MultiHeadAttention.from_spec(full.spec.replace(output_gate=False), full.rotary)
    ungated.load_state_dict({k: v for k, v in full.state_dict().items() if not k.startswith("W_gate")})
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        full.W_gate.weight.zero_()
        torch.testing.assert_close(full(x), 0.5 * ungated(x), atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_cache_holds_what_the_formula_says(dtype):
    """Keys and values grow by a row per token in the full layer; the linear layers' states keep their bytes."""
    model = tiny().to(dtype)
    cache = model.new_cache(2)
    assert isinstance(cache, HybridCache)
    assert [type(layer) for layer in cache.layers] == [RecurrentLayerCache] * 3 + [LayerKVCache]
    ids = torch.randint(0, 256, (2, 12))
    with torch.no_grad():
        model(ids[:, :9], kv_cache=cache)
        states = [layer.nbytes for layer in cache.layers[:3]]
        model(ids[:, 9:], kv_cache=cache)
    assert [layer.nbytes for layer in cache.layers[:3]] == states
    assert all(layer.state.dtype == torch.float32 for layer in cache.layers[:3])
    c = model.config
    assert cache.filled_nbytes() == c.cache_bytes(12, batch=2, dtype=dtype)
    size = torch.empty((), dtype=dtype).element_size()
    assert c.cache_bytes_per_token(dtype) == 1 * 2 * c.num_kv_heads * c.head_dim * size
    cache.reset()
    assert cache.length == 0 and cache.filled_nbytes() == 0


def test_qwen3_5_9b_has_transformers_parameter_count_and_cache_sizes():
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        ours = HybridDecoder(Qwen3NextConfig.from_preset("qwen3.5-9b"))
        theirs = transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig())  # its defaults: Qwen3.5-9B
    assert ours.num_parameters() == sum(p.numel() for p in theirs.parameters())
    c = ours.config
    assert c.layer_types == theirs.config.layer_types
    # 8 full layers of 4 key/value heads of 256, in bfloat16; 24 memories of 32 heads × 128 × 128 in float32 and
    # their convolutions' last 3 inputs of 2 · 16 · 128 + 32 · 128 channels
    assert c.cache_bytes_per_token() == 8 * 2 * 4 * 256 * 2
    assert c.state_bytes_per_sequence() == 24 * (32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2)


@pytest.mark.parametrize(("changes", "message"), [
    (dict(layer_types=["linear_attention"] * 3), r"layer_types must list num_layers=4 entries, each one of "
                                                 r"\('linear_attention', 'full_attention'\)"),
    (dict(layer_types=["linear_attention"] * 3 + ["sliding_attention"]), r"layer_types must list num_layers=4"),
    (dict(linear_num_value_heads=3), r"linear_num_value_heads=3 must be a multiple of linear_num_key_heads=2"),
    (dict(partial_rotary_factor=0.1), r"partial_rotary_factor=0.1 turns int\(head_dim · factor\) = 0 features"),
    (dict(partial_rotary_factor=1.5), r"partial_rotary_factor=1.5"),
    (dict(chunk_size=0), r"chunk_size"),
    (dict(linear_key_head_dim=0), r"linear_key_head_dim"),
])
def test_bad_configs_are_one_line_naming_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        Qwen3NextConfig.from_preset("tiny", **changes)
