import pytest
import torch

from attnlab.models import GPT, EncoderConfig, GPTConfig, TransformerEncoder


def count(model_cls, cfg):
    with torch.device("meta"):  # nothing allocated, even for 1.5 B parameters
        model = model_cls(cfg)
    assert next(model.parameters()).is_meta
    return model.num_parameters()


@pytest.mark.parametrize(("name", "overrides", "expected"), [
    ("gpt2-small", {}, 124_439_808),
    ("gpt2-xl", {}, 1_557_611_200),
    ("baby", {"vocab_size": 82}, 812_032),  # nanoGPT's baby Shakespeare model, char vocab 82
    ("baby", {}, 834_304),
    ("tiny", {}, 34_688),
])
def test_gpt_preset_parameter_counts(name, overrides, expected):
    assert count(GPT, GPTConfig.from_preset(name, **overrides)) == expected


def gpt_count_by_hand(v, ctx, d, n, d_ff):
    per_block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d + (d * d_ff + d_ff) + (d_ff * d + d)
    return v * d + ctx * d + n * per_block + 2 * d  # tied head: no extra matrix


def test_gpt_count_formula_and_presets():
    cfg = GPTConfig.from_preset("gpt2-xl")
    assert (cfg.num_layers, cfg.num_heads, cfg.d_model, cfg.d_ff) == (48, 25, 1600, 6400)
    assert count(GPT, cfg) == gpt_count_by_hand(50257, 1024, 1600, 48, 6400)
    tiny = GPTConfig.from_preset("tiny")
    assert count(GPT, tiny) == gpt_count_by_hand(256, 32, 32, 2, 128)
    baby = GPTConfig.from_preset("baby")
    assert (baby.num_layers, baby.num_heads, baby.d_model, baby.context_length) == (4, 4, 128, 64)


# BERT-base without its pooler: 108,891,648 (Hugging Face's BertModel, with the 768x768 pooler: 109,482,240)
@pytest.mark.parametrize(("name", "expected"), [
    ("bert-base", 108_891_648),
    ("tutorial-encoder", 108_490_752),  # vocab 30,000: 522 x 768 fewer
    ("minilm-l6", 22_565_376),  # all-MiniLM-L6-v2 has 22,713,216 with its 384x384 pooler
])
def test_encoder_preset_parameter_counts(name, expected):
    assert count(TransformerEncoder, EncoderConfig.from_preset(name)) == expected


def test_bert_base_layout():
    c = EncoderConfig.from_preset("bert-base")
    assert (c.vocab_size, c.context_length, c.type_vocab_size, c.d_model, c.num_layers, c.num_heads, c.d_ff) == \
        (30522, 512, 2, 768, 12, 12, 3072)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"vocab_size": 0}, "vocab_size"),
    ({"context_length": -1}, "context_length"),
    ({"d_model": 30}, "divisible by num_heads"),
    ({"dropout": 1.0}, "dropout"),
    ({"activation": "swish"}, "activation"),
    ({"backend": "fast"}, "backend"),
    ({"num_layers": 2.0}, "num_layers"),
])
def test_gpt_config_errors(kwargs, match):
    base = dict(vocab_size=10, context_length=8, d_model=16, num_layers=1, num_heads=4)
    with pytest.raises(ValueError, match=match):
        GPTConfig(**{**base, **kwargs})


def test_preset_errors():
    with pytest.raises(ValueError, match="unknown preset 'gpt5'"):
        GPTConfig.from_preset("gpt5")
    with pytest.raises(TypeError, match="n_layer"):
        GPTConfig.from_preset("tiny", n_layer=3)
    with pytest.raises(ValueError, match=r"^EncoderConfig: pad_id must be in \[0, vocab_size=30522\), got 40000$"):
        EncoderConfig.from_preset("bert-base", pad_id=40000)
    assert GPTConfig(vocab_size=10, context_length=8, d_model=16, num_layers=1, num_heads=4).d_ff == 64


def test_the_building_blocks_messages_a_config_translates_are_marked():
    """A config words the blocks' checks with ``tr``; models/config.py marks their templates for the catalog."""
    from attnlab.arguments import ONE_OF, POSITIVE_INT
    from attnlab.layers.block import NORM_MESSAGE
    from attnlab.models.config import TRANSLATED_CHECKS

    assert set(TRANSLATED_CHECKS) == {POSITIVE_INT, ONE_OF, NORM_MESSAGE}
