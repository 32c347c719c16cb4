"""Direct logit attribution on every kind of model: the parts sum to the logit difference, each part against the
same part read off the model's own modules by hand; the models with no linear readout refused."""

from __future__ import annotations

import pytest
import torch

from attnlab.heads.logit_attribution import answer_direction, logit_attribution
from attnlab.models import ModernDecoder, ModernDecoderConfig
from patching_models import VOCAB, inputs, make, order_one

TOL = 1e-5
RIGHT, WRONG = [5, 9, 30], [7, 2, 11]


def difference(model, x, position=-1):
    with torch.no_grad():
        logits = model(*x).logits if isinstance(x, tuple) else model(x).logits
    rows = torch.arange(3)
    return float((logits[rows, position, RIGHT] - logits[rows, position, WRONG]).mean())


@pytest.mark.parametrize("kind", ["gpt", "modern", "attention-only"])
@pytest.mark.parametrize("position", [-1, 2])
def test_the_parts_sum_to_the_logit_difference(kind, position):
    model = make(kind, seed=1)
    x, _ = inputs(kind, 1)
    found = logit_attribution(model, x, answer_direction(VOCAB, RIGHT, WRONG), position=position)
    assert abs(float(found.total) - difference(model, x, position)) < TOL
    assert abs(float(found.sum()) - float(found.total)) < TOL
    assert found.heads.shape == (2, model.config.num_heads) and found.heads.abs().max() > 0.01
    assert ("feed-forward" in found.parts) == (kind != "attention-only")


def test_a_pre_norm_translation_model_splits_its_cross_attention_into_heads():
    model = make("translation", seed=2, norm="pre")
    x, _ = inputs("translation", 2)
    found = logit_attribution(model, x, answer_direction(VOCAB, RIGHT, WRONG))
    assert abs(float(found.total) - difference(model, x)) < TOL
    assert abs(float(found.sum()) - float(found.total)) < TOL
    assert found.heads.shape == (2, 4) and found.parts["self-attention"].shape == (2,)


def test_each_part_is_its_module_read_by_hand():
    """A GPT: the feed-forward part is block.ff's output, a head's part its slice of out_proj's input times its
    columns of out_proj's weight, each through the final LayerNorm with the scale of the whole stream."""
    model = make("gpt", seed=3)
    x, _ = inputs("gpt", 3)
    kept = {}
    hooks = [model.blocks[i].ff.register_forward_hook(lambda m, a, out, i=i: kept.__setitem__(("ff", i), out))
             for i in range(2)]
    hooks += [model.blocks[i].attn.out_proj.register_forward_pre_hook(lambda m, a, i=i: kept.__setitem__(("z", i),
                                                                                                         a[0]))
              for i in range(2)]
    hooks.append(model.ln_f.register_forward_pre_hook(lambda m, a: kept.__setitem__("x", a[0])))
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    stream = kept["x"][:, -1]
    sigma = torch.sqrt(stream.var(-1, unbiased=False, keepdim=True) + model.ln_f.eps)
    direction = model.head.weight[RIGHT] - model.head.weight[WRONG]  # (B, D)

    def read(c):
        return float(((c - c.mean(-1, keepdim=True)) / sigma * model.ln_f.weight * direction).sum(-1).mean())

    found = logit_attribution(model, x, answer_direction(VOCAB, RIGHT, WRONG))
    for i in range(2):
        assert abs(float(found.parts["feed-forward"][i]) - read(kept[("ff", i)][:, -1])) < TOL
        w, d = model.blocks[i].attn.out_proj.weight, model.blocks[i].attn.head_dim
        for h in range(2):
            part = kept[("z", i)][:, -1, h * d:(h + 1) * d] @ w[:, h * d:(h + 1) * d].T
            assert abs(float(found.heads[i, h]) - read(part)) < TOL


@pytest.mark.parametrize(("make_model", "words"), [
    (lambda: make("translation", seed=4), "post-norm"),
    (lambda: order_one(ModernDecoder(ModernDecoderConfig.from_preset("tiny", vocab_size=VOCAB, sandwich_norm=True,
                                                                      norm_unit_offset=True)), 4), "sandwich"),
    (lambda: order_one(ModernDecoder(ModernDecoderConfig.from_preset("tiny", vocab_size=VOCAB, final_softcap=3.0)),
                       4), "soft-capped"),
])
def test_a_model_without_a_linear_readout_is_refused(make_model, words):
    model = make_model()
    kind = "translation" if hasattr(model, "decoder_blocks") else "modern"
    x, _ = inputs(kind, 4)
    with pytest.raises(ValueError, match=f"read linearly.*{words}"):
        logit_attribution(model, x, answer_direction(VOCAB, RIGHT, WRONG))


def test_an_rms_norm_with_a_unit_offset_is_read_with_its_gain():
    """Gemma's (1 + w) final RMSNorm, without its sandwich norms: still a linear readout."""
    model = order_one(ModernDecoder(ModernDecoderConfig.from_preset("tiny", vocab_size=VOCAB, norm_unit_offset=True)),
                      5)
    x, _ = inputs("modern", 5)
    found = logit_attribution(model, x, answer_direction(VOCAB, RIGHT, WRONG))
    assert abs(float(found.sum()) - difference(model, x)) < TOL
