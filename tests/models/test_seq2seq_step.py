"""The incremental decoder against Transformer.decode over the whole prefix: every step's logits, with padded
sources, beams that follow random parents, post-LN and pre-LN, every activation, with and without biases."""

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
        step = model.incremental_decoder(memory, mask, beams=beams, length=6)
        rows = torch.arange(3).repeat_interleave(beams)
        memory_rows, mask_rows = memory[rows], mask[rows]  # the reference repeats the memory for the beams
        tokens = torch.full((3 * beams, 1), model.config.bos_id)
        for t in range(6):
            logits = step(tokens[:, -1])
            whole = model.decode(tokens, memory_rows, src_mask=mask_rows, tgt_mask=torch.ones_like(tokens))
            torch.testing.assert_close(logits, whole[:, -1], atol=1e-5, rtol=0)
            assert step.position == t + 1
            # each row continues a random row of its own source, as a beam search step does
            parents = (rows * beams + torch.randint(0, beams, (3 * beams,), generator=g))
            step.reorder(parents)
            tokens = torch.cat([tokens[parents], torch.randint(3, 30, (3 * beams, 1), generator=g)], dim=1)


def test_the_memory_is_projected_once_per_source_not_per_beam():
    model = _model(0)
    src, mask = _sources()
    with torch.no_grad():
        step = model.incremental_decoder(model.encode(src), mask, beams=4)
    layer = step.layers[0]
    assert layer.memory_values.shape == (3, 4, 7, 16) and layer.memory_keys_t.shape == (3, 4, 16, 7)
    assert layer.kv.shape == (12, 12, 2, 4, 16)  # (length, B · beams, keys and values, H, head_dim)


def test_reorder_keeps_the_buffers():
    """Following the beams writes into the spare buffers allocated at the start: nothing allocated per step."""
    model = _model(0)
    src, mask = _sources()
    with torch.no_grad():
        step = model.incremental_decoder(model.encode(src), mask, beams=2, length=4)
        buffers = {t.data_ptr() for layer in step.layers for t in (layer.kv, layer.spare)}
        for _ in range(3):
            step(torch.full((6,), 5))
            step.reorder(torch.tensor([1, 1, 2, 3, 5, 4]))
        assert {t.data_ptr() for layer in step.layers for t in (layer.kv, layer.spare)} == buffers


@pytest.mark.parametrize(("kwargs", "msg"), [
    (dict(beams=0), "beams must be a positive int, got 0"),
    (dict(beams=True), "beams must be a positive int, got True"),
    (dict(length=13), r"length must be an int in \[1, context_length=12\], got 13"),
    (dict(src_mask=torch.ones(3, 5, dtype=torch.long)), r"src_mask must have shape \(3, 7\)"),
])
def test_bad_input_is_named(kwargs, msg):
    model = _model(0)
    memory = torch.zeros(3, 7, 64)
    with pytest.raises((ValueError, TypeError), match=msg):
        model.incremental_decoder(memory, **kwargs)
