"""DiffLlama's config: every layer differential at its depth, the preset as large as transformers' model of the same
config, the cache formula, and the settings differential attention cannot take."""

import doctest

import pytest
import torch

import attnlab.models.modern.diffllama as diffllama_module
from attnlab.attention.differential import DifferentialAttention
from attnlab.models import ModernDecoder
from attnlab.models.modern.diffllama import DiffLlamaConfig


def test_every_layer_attends_differentially_at_its_depth():
    model = ModernDecoder(DiffLlamaConfig.from_preset("baby", vocab_size=82))
    assert all(type(block.attn) is DifferentialAttention for block in model.blocks)
    assert [block.attn.differential.depth for block in model.blocks] == [0, 1, 2, 3]
    assert model.blocks[0].attn.lambda_init == pytest.approx(0.2)
    assert model.blocks[2].attn.rotary is model.rotary
    assert sorted(name for name, _ in model.blocks[1].attn.named_parameters() if "lambda" in name) == \
        ["lambda_k1", "lambda_k2", "lambda_q1", "lambda_q2"]


def test_the_preset_is_as_large_as_transformers_model_of_the_same_config():
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        ours = ModernDecoder(DiffLlamaConfig.from_preset("diffllama-default")).num_parameters()
        theirs = transformers.DiffLlamaForCausalLM(transformers.DiffLlamaConfig()).num_parameters()
    assert ours == theirs == 1_204_885_504


def test_the_cache_is_llamas_keys_and_values():
    c = DiffLlamaConfig.from_preset("diffllama-default")
    assert c.cache_bytes_per_token() == 2 * 16 * 32 * 64 * 2 == 131_072  # bf16
    assert c.cache_bytes(4096, batch=2, dtype=torch.float32) == 2 * 4096 * 2 * 131_072
    model = ModernDecoder(DiffLlamaConfig.from_preset("baby", vocab_size=82))
    cache = model.new_cache(1)
    with torch.no_grad():
        model(torch.zeros(1, 5, dtype=torch.long), kv_cache=cache)
    assert cache.filled_nbytes() == model.config.cache_bytes(5, dtype=torch.float32)


@pytest.mark.parametrize(("changes", "match"), [
    (dict(num_heads=3, num_kv_heads=1, head_dim=32),
     r"^DiffLlamaConfig: differential attention pairs its heads \(h with h \+ H/2\), so num_heads must be even, got "
     r"num_heads=3$"),
    (dict(num_kv_heads=1), r"so num_kv_heads must be even, got num_kv_heads=1$"),
    (dict(dropout=0.1), r"^DiffLlamaConfig: differential attention has no dropout .* got dropout=0\.1$"),
    (dict(attn_softcap=50.0), r"^DiffLlamaConfig: differential attention does not combine with attn_softcap=50\.0$"),
    (dict(qk_norm="head"), r"does not combine with qk_norm='head'$"),
    (dict(lambda_std=0), r"^DiffLlamaConfig: lambda_std must be a finite number > 0, got 0$"),
])
def test_what_differential_attention_cannot_take_is_refused_by_name(changes, match):
    with pytest.raises(ValueError, match=match):
        DiffLlamaConfig.from_preset("baby", **changes)


def test_the_docstring_example_runs():
    assert doctest.testmod(diffllama_module, raise_on_error=False).failed == 0
