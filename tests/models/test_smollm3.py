"""SmolLM3's config: its NoPE layers built without RoPE (and computing without it), the preset as large as
transformers' model of the same config, the cache formula, and a wrong list of NoPE layers."""

import doctest
import re

import pytest
import torch

import attnlab.models.modern.smollm3 as smollm3_module
from attnlab.models import ModernDecoder
from attnlab.models.modern.smollm3 import SmolLM3Config, every_fourth


def test_every_fourth_layer_is_a_nope_layer_unless_listed():
    assert every_fourth(9) == [3, 7] and every_fourth(6, 2) == [1, 3, 5]
    model = ModernDecoder(SmolLM3Config.from_preset("baby", vocab_size=82))
    assert [block.attn.rotary is None for block in model.blocks] == [False, False, False, True]
    listed = SmolLM3Config.from_preset("baby", nope_layers=[2, 0])
    assert listed.nope_layers == [0, 2] and [listed.layer_spec(i).rope for i in range(4)] == [False, True, False, True]


def test_a_nope_layers_scores_do_not_depend_on_where_the_tokens_are():
    """The same tokens at positions twice as far apart give a NoPE layer the same output, a rotated layer another
    (a mere shift would not do: RoPE's scores see only the distances)."""
    torch.manual_seed(0)
    model = ModernDecoder(SmolLM3Config.from_preset("baby", vocab_size=82)).eval()
    with torch.no_grad():  # weights of order 1: scores far from flat
        for p in model.parameters():
            p.copy_(torch.randn_like(p) / 128**0.5)
    x = torch.randn(1, 6, 128)
    nope, rope = model.blocks[3].attn, model.blocks[0].attn
    with torch.no_grad():
        torch.testing.assert_close(nope(x, positions=torch.arange(0, 12, 2)), nope(x), atol=1e-6, rtol=0)
        assert not torch.allclose(rope(x, positions=torch.arange(0, 12, 2)), rope(x), atol=1e-2)


def test_the_preset_is_as_large_as_transformers_model_of_the_same_config():
    transformers = pytest.importorskip("transformers")
    config = transformers.SmolLM3Config(max_position_embeddings=65536,
                                        rope_parameters=dict(rope_type="default", rope_theta=5000000.0))
    with torch.device("meta"):
        ours = ModernDecoder(SmolLM3Config.from_preset("smollm3-3b")).num_parameters()
        theirs = transformers.SmolLM3ForCausalLM(config).num_parameters()
    assert ours == theirs == 3_075_098_624


def test_the_cache_counts_every_layer_and_a_window_stops_one_growing():
    c = SmolLM3Config.from_preset("smollm3-3b")
    assert c.cache_bytes_per_token() == 2 * 36 * 4 * 128 * 2 == 73_728  # bf16: NoPE layers cache keys too
    windowed = SmolLM3Config.from_preset("baby", sliding_window=8, layer_types=["full_attention"] * 3
                                         + ["sliding_attention"])
    assert windowed.cache_bytes_per_token(torch.float32) == 3 * 2 * 2 * 32 * 4
    assert windowed.cache_bytes(20, dtype=torch.float32) == (3 * 20 + 8) * 2 * 2 * 32 * 4
    model = ModernDecoder(SmolLM3Config.from_preset("baby", vocab_size=82))
    cache = model.new_cache(2)
    with torch.no_grad():
        model(torch.zeros(2, 7, dtype=torch.long), kv_cache=cache)
    assert cache.filled_nbytes() == model.config.cache_bytes(7, batch=2, dtype=torch.float32)


@pytest.mark.parametrize("nope_layers", [[4], [-1], [1, 1], [True], "3"])
def test_a_wrong_list_of_nope_layers_is_refused_by_name(nope_layers):
    with pytest.raises(ValueError, match=r"^SmolLM3Config: nope_layers must list distinct layer indices in \[0, 4\), "
                                         f"got {re.escape(repr(nope_layers))}$"):
        SmolLM3Config.from_preset("baby", nope_layers=nope_layers)


def test_the_docstring_example_runs():
    assert doctest.testmod(smollm3_module, raise_on_error=False).failed == 0
