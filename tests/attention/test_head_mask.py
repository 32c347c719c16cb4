"""``head_mask`` (Michel et al., 2019) against the reference: the head's slice of ``out_proj``'s input scaled (or
zeroed) by hand, through a forward pre-hook, with no head mask given to the model at all."""

from __future__ import annotations

import contextlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.attention import AttentionSpec, GroupedQueryAttention, MultiHeadAttention
from attnlab.models import GPT, EncoderConfig, GPTConfig, ModernDecoder, ModernDecoderConfig, TransformerEncoder
from references import scaled_by_hand

MASKS = [torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor([0.0, 0.0, 0.0, 0.0]), torch.tensor([0.5, 1.0, 0.0, 2.0])]


@pytest.mark.parametrize("mask", MASKS, ids=["one-removed", "all-removed", "scaled"])
@pytest.mark.parametrize("backend", ["math", "sdpa", "chunked"])
@pytest.mark.parametrize("module_cls", [MultiHeadAttention, GroupedQueryAttention])
def test_module_head_mask_equals_the_hand_zeroed_slice(module_cls, backend, mask):
    if module_cls is GroupedQueryAttention:
        attn = GroupedQueryAttention(AttentionSpec(16, 16, 4, num_kv_heads=2, backend=backend)).eval()
    else:
        attn = MultiHeadAttention(16, 16, None, 0.0, 4, backend=backend).eval()
    x = torch.randn(2, 7, 16)
    with scaled_by_hand([attn], mask[None], head_dim=4):
        want = attn(x)
    torch.testing.assert_close(attn(x, head_mask=mask), want, atol=1e-6, rtol=0)


def test_a_removed_head_changes_nothing_when_its_output_weights_change():
    """The masked head's columns of out_proj no longer matter: the head really adds nothing."""
    attn = MultiHeadAttention(16, 16, None, 0.0, 4).eval()
    x, mask = torch.randn(2, 5, 16), torch.tensor([1.0, 1.0, 0.0, 1.0])
    before = attn(x, head_mask=mask)
    with torch.no_grad():
        attn.out_proj.weight[:, 8:12] = torch.randn(16, 4) * 10
    torch.testing.assert_close(attn(x, head_mask=mask), before, atol=1e-6, rtol=0)
    assert not torch.allclose(attn(x), before, atol=1e-3)


def _gpt():
    return GPT(GPTConfig(vocab_size=40, context_length=12, d_model=32, num_layers=3, num_heads=4)).eval()


def _modern():
    return ModernDecoder(ModernDecoderConfig.from_preset("tiny", num_layers=3, vocab_size=40)).eval()


def _encoder():
    return TransformerEncoder(EncoderConfig(vocab_size=40, context_length=12, d_model=32, num_layers=3,
                                            num_heads=4)).eval()


@pytest.mark.parametrize("build", [_gpt, _modern, _encoder], ids=["gpt", "modern", "encoder"])
@settings(max_examples=8)
@given(seed=st.integers(0, 2**31 - 1))
def test_model_head_mask_equals_the_hand_zeroed_slices(build, seed):
    torch.manual_seed(0)
    model = build()
    g = torch.Generator().manual_seed(seed)
    c = model.config
    head_mask = (torch.rand(c.num_layers, c.num_heads, generator=g) > 0.4).float()
    idx = torch.randint(0, 40, (2, 9), generator=g)
    modules = [block.attn for block in model.blocks]
    with torch.no_grad(), scaled_by_hand(modules, head_mask, modules[0].head_dim):
        want = model(idx)
    with torch.no_grad():
        got = model(idx, head_mask=head_mask)
    field = "logits" if hasattr(got, "logits") else "last_hidden_state"
    torch.testing.assert_close(getattr(got, field), getattr(want, field), atol=1e-5, rtol=0)


def test_all_ones_is_no_mask_and_the_weights_are_unchanged():
    model = _gpt()
    idx = torch.randint(0, 40, (2, 9))
    ones = torch.ones(3, 4)
    with torch.no_grad():
        plain, masked = model(idx, return_weights=True), model(idx, return_weights=True, head_mask=ones)
        removed = model(idx, return_weights=True, head_mask=torch.zeros(3, 4))
    torch.testing.assert_close(masked.logits, plain.logits, atol=0, rtol=0)
    # the mask acts on what a head writes, not on where it looks: layer 0's weights are the same
    torch.testing.assert_close(removed.attentions[0], plain.attentions[0], atol=0, rtol=0)


def test_the_gradient_of_the_loss_by_the_mask_is_the_finite_difference():
    """∂L/∂ξ_h, the importance of Michel et al., against a central difference in float64."""
    model = _gpt().double()
    idx, targets = torch.randint(0, 40, (2, 9)), torch.randint(0, 40, (2, 9))
    xi = torch.ones(3, 4, dtype=torch.float64, requires_grad=True)
    model(idx, targets=targets, head_mask=xi).loss.backward()
    eps = 1e-6
    for layer, head in [(0, 0), (1, 2), (2, 3)]:
        step = torch.zeros(3, 4, dtype=torch.float64)
        step[layer, head] = eps
        with torch.no_grad():
            plus = model(idx, targets=targets, head_mask=1 + step).loss
            minus = model(idx, targets=targets, head_mask=1 - step).loss
        assert abs(xi.grad[layer, head].item() - ((plus - minus) / (2 * eps)).item()) < 1e-7


def test_under_bf16_autocast():
    model = _gpt()
    idx = torch.randint(0, 40, (2, 9))
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0]] * 3)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        got = model(idx, head_mask=mask).logits
        with scaled_by_hand([b.attn for b in model.blocks], mask, 8):
            want = model(idx).logits
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, atol=0, rtol=0)


@pytest.mark.parametrize(("head_mask", "error", "words"), [
    (torch.ones(4), ValueError, ["GPT", "head_mask", "(num_layers, num_heads) = (3, 4)", "(4,)"]),
    (torch.ones(3, 5), ValueError, ["(3, 4)", "(3, 5)"]),
    (torch.ones(3, 4, dtype=torch.long), TypeError, ["floating-point", "torch.int64"]),
    ([[1.0] * 4] * 3, TypeError, ["torch.Tensor", "list"]),
])
def test_a_wrong_head_mask_is_named(head_mask, error, words):
    with pytest.raises(error) as info:
        _gpt()(torch.zeros(1, 3, dtype=torch.long), head_mask=head_mask)
    for word in words:
        assert word in str(info.value)


def test_a_module_names_the_shape_it_wanted():
    with pytest.raises(ValueError, match=r"MultiHeadAttention: head_mask must have shape \(num_heads,\) = \(4,\), "
                                         r"got \(2, 4\)"):
        MultiHeadAttention(16, 16, None, 0.0, 4)(torch.randn(1, 3, 16), head_mask=torch.ones(2, 4))


def _translator():
    from attnlab.models import Transformer, TransformerConfig

    return Transformer(TransformerConfig.from_preset("transformer-tiny", vocab_size=40, num_encoder_layers=3,
                                                     dropout=0.0)).eval()


@settings(max_examples=8)
@given(seed=st.integers(0, 2**31 - 1))
def test_the_translation_models_three_head_masks_equal_the_hand_zeroed_slices(seed):
    """One mask per attention (encoder 3 layers, decoder and cross 2), each against its modules' out_proj input scaled
    by hand; a mask left out keeps every head of its attention."""
    from attnlab.models import Seq2SeqHeadMask

    torch.manual_seed(0)
    model = _translator()
    g = torch.Generator().manual_seed(seed)
    masks = {name: (torch.rand(layers, 4, generator=g) > 0.4).float()
             for name, layers in (("encoder", 3), ("decoder", 2), ("cross", 2))}
    modules = {"encoder": [b.attn for b in model.encoder_blocks],
               "decoder": [b.self_attn for b in model.decoder_blocks],
               "cross": [b.cross_attn for b in model.decoder_blocks]}
    src, tgt = torch.randint(3, 40, (2, 7), generator=g), torch.randint(3, 40, (2, 5), generator=g)
    for given_masks in (masks, {"cross": masks["cross"]}, {"encoder": masks["encoder"], "decoder": masks["decoder"]}):
        with torch.no_grad(), contextlib.ExitStack() as hands:
            for name, mask in given_masks.items():
                hands.enter_context(scaled_by_hand(modules[name], mask, head_dim=16))
            want = model(src, tgt, return_weights=True)
        with torch.no_grad():
            got = model(src, tgt, return_weights=True, head_mask=Seq2SeqHeadMask(**given_masks))
        torch.testing.assert_close(got.logits, want.logits, atol=1e-6, rtol=0)
        for field in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
            torch.testing.assert_close(getattr(got, field), getattr(want, field), atol=1e-6, rtol=0)


def test_a_removed_cross_attention_head_no_longer_reads_the_source():
    """Every cross-attention head off: the source reaches the output through nothing, so any source gives the same
    logits."""
    from attnlab.models import Seq2SeqHeadMask

    model = _translator()
    tgt = torch.randint(3, 40, (1, 5))
    off = Seq2SeqHeadMask(cross=torch.zeros(2, 4))
    with torch.no_grad():
        a = model(torch.randint(3, 40, (1, 7)), tgt, head_mask=off).logits
        b = model(torch.randint(3, 40, (1, 7)), tgt, head_mask=off).logits
        c = model(torch.randint(3, 40, (1, 7)), tgt).logits
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert not torch.allclose(a, c, atol=1e-3)


def _masks(**fields):
    from attnlab.models import Seq2SeqHeadMask

    return Seq2SeqHeadMask(**fields)


@pytest.mark.parametrize(("head_mask", "error", "words"), [
    (lambda: torch.ones(2, 4), TypeError, ["Transformer", "Seq2SeqHeadMask(encoder=..., decoder=..., cross=...)",
                                           "Tensor"]),
    (lambda: {"cross": torch.ones(2, 4)}, TypeError, ["Seq2SeqHeadMask", "dict"]),
    (lambda: _masks(encoder=torch.ones(2, 4)), ValueError,
     ["head_mask.encoder", "(num_encoder_layers, num_heads) = (3, 4)", "(2, 4)"]),
    (lambda: _masks(cross=torch.ones(3, 4)), ValueError,
     ["head_mask.cross", "(num_decoder_layers, num_heads) = (2, 4)", "(3, 4)"]),
    (lambda: _masks(decoder=torch.ones(2, 4, dtype=torch.long)), TypeError,
     ["head_mask.decoder", "floating-point", "torch.int64"]),
], ids=["a-tensor", "a-dict", "encoder-shape", "cross-shape", "decoder-dtype"])
def test_a_wrong_translation_head_mask_is_named(head_mask, error, words):
    with pytest.raises(error) as info:
        _translator()(torch.randint(3, 40, (1, 4)), torch.randint(3, 40, (1, 3)), head_mask=head_mask())
    for word in words:
        assert word in str(info.value), (word, str(info.value))
