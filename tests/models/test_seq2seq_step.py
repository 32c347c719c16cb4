"""Transformer.decode_step (the decoder blocks with a cache, one token per row per step, as the searches run them)
against Transformer.decode over the whole prefix: every step's logits, with padded sources, beams that follow random
parents, post-LN and pre-LN, every activation, with and without biases."""

import pytest
import torch

from attnlab.models import Transformer, TransformerConfig

CONFIGS = [
    dict(),  # the paper: post-LN, ReLU, biases
    dict(norm="pre", activation="gelu"),  # pre-LN with the final LayerNorms
    dict(bias=False, activation="gelu_tanh", final_norm=True),
]


def _model(seed: int, **overrides) -> Transformer:
    torch.manual_seed(seed)
    config = TransformerConfig.from_preset("transformer-tiny", vocab_size=30, context_length=12, dropout=0.0,
                                      num_decoder_layers=3, **overrides)
    model = Transformer(config).eval()
    with torch.no_grad():  # biases and LayerNorms away from 0 and 1, so that each is used where it should be
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)
            elif "ln" in name or "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def _sources(padded: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.randint(3, 30, (3, 7), generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5], dtype=torch.bool)
    if not padded:
        mask = torch.ones_like(mask)
    return src.masked_fill(~mask, 0), mask


@pytest.mark.parametrize("overrides", CONFIGS)
@pytest.mark.parametrize(("beams", "padded"), [(1, True), (3, True), (3, False)])
def test_each_step_equals_decode_over_the_whole_prefix(overrides, beams, padded):
    model = _model(0, **overrides)
    src, mask = _sources(padded)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        memory = model.encode(src)
        cache = model.new_cache(memory, mask, 6, beams=beams)
        rows = torch.arange(3).repeat_interleave(beams)
        memory_rows, mask_rows = memory[rows], mask[rows]  # the reference repeats the memory for the beams
        tokens = torch.full((3 * beams, 1), model.config.bos_id)
        for t in range(6):
            logits = model.decode_step(tokens[:, -1:], cache)
            whole = model.decode(tokens, memory_rows, src_mask=mask_rows, tgt_mask=torch.ones_like(tokens))
            torch.testing.assert_close(logits, whole[:, -1], atol=1e-5, rtol=0)
            assert cache.length == t + 1
            # each row continues a random row of its own source, as a beam search step does
            parents = (rows * beams + torch.randint(0, beams, (3 * beams,), generator=g))
            cache.reorder(parents, memory=False)
            tokens = torch.cat([tokens[parents], torch.randint(3, 30, (3 * beams, 1), generator=g)], dim=1)


def test_the_memory_is_projected_once_per_source_not_per_beam():
    model = _model(0)
    src, mask = _sources()
    with torch.no_grad():
        cache = model.new_cache(model.encode(src), mask, beams=4)
    keys, values = cache[0].memory_kv
    assert keys.shape == values.shape == (3, 4, 7, 16)  # (B, H, S, head_dim): per source
    assert cache[0].keys.shape == (12, 4, 12, 16) and cache.memory_mask.shape == (3, 1, 1, 7)  # B · beams rows


def test_following_the_beams_allocates_nothing_per_step():
    """A beam step's reorder writes into a second buffer (keys and values together), allocated once, and the two
    swap."""
    model = _model(0)
    src, mask = _sources()
    with torch.no_grad():
        cache = model.new_cache(model.encode(src), mask, 4, beams=2)
        buffers = None
        for _ in range(3):
            model.decode_step(torch.full((6, 1), 5), cache)
            cache.reorder(torch.tensor([1, 1, 2, 3, 5, 4]), memory=False)
            now = {t.data_ptr() for layer in cache.layers for t in (layer.storage, layer.spare)}
            assert buffers is None or now == buffers
            buffers = now


def test_a_sources_beams_attend_its_memory_together_weights_included():
    """The decoder block's cross-attention with the memory once per source equals it with the memory per row."""
    model = _model(0)
    block, (src, mask) = model.decoder_blocks[0], _sources()
    beams, g = 2, torch.Generator().manual_seed(3)
    with torch.no_grad():
        memory = model.encode(src)
        x = torch.randn(3 * beams, 1, 64, generator=g)
        rows = torch.arange(3).repeat_interleave(beams)
        shared, per_row = model.new_cache(memory, mask, beams=beams), model.new_cache(memory[rows], mask[rows])
        got = block(x, attn_mask=None, memory_attn_mask=shared.memory_mask, kv_cache=shared[0], return_weights=True)
        want = block(x, attn_mask=None, memory_attn_mask=per_row.memory_mask, kv_cache=per_row[0],
                     return_weights=True)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert got[2].shape == (6, 4, 1, 7)  # the cross-attention's weights, a row each


@pytest.mark.parametrize(("kwargs", "msg"), [
    (dict(beams=0), "^Transformer.new_cache: beams must be a positive int, got 0$"),
    (dict(beams=True), "beams must be a positive int, got True"),
    (dict(context_length=13), r"context_length must be an int in \[1, 12\], got 13"),
    (dict(src_mask=torch.ones(3, 5, dtype=torch.long)), r"src_mask must have shape \(3, 7\)"),
])
def test_bad_input_is_named(kwargs, msg):
    model = _model(0)
    memory = torch.zeros(3, 7, 64)
    with pytest.raises((ValueError, TypeError), match=msg):
        model.new_cache(memory, **kwargs)
