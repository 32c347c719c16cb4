import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.layers import BlockSpec, DecoderBlock
from references import torch_decoder_layer


def _masks():
    tgt = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4])
    mem = torch.tensor([[1] * 7, [1] * 3 + [0] * 4, [1] * 6 + [0]])
    return tgt, mem


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("backend", ["auto", "math"])
def test_equals_torch_transformer_decoder_layer(norm, padding, backend):
    block = DecoderBlock(BlockSpec(16, 4, 40, norm=norm, activation="relu", backend=backend)).eval()
    with torch.no_grad():  # LayerNorms away from γ=1, β=0, so that copying them is tested too
        for ln in (block.ln1, block.ln2, block.ln3):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.normal_()
    ref = torch_decoder_layer(block)
    x, memory = torch.randn(3, 6, 16), torch.randn(3, 7, 16)
    tgt_mask, mem_mask = _masks() if padding else (None, None)
    kwargs = dict(tgt_key_padding_mask=tgt_mask == 0, memory_key_padding_mask=mem_mask == 0) if padding else {}
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)  # torch: True = may NOT attend
    expected = ref(x, memory, tgt_mask=causal, **kwargs)
    got = block(x, memory, attention_mask=tgt_mask, memory_mask=mem_mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_weights_have_the_right_shapes_and_rows_sum_to_one():
    block = DecoderBlock(BlockSpec(16, 4, 32, norm="post", activation="relu")).eval()
    tgt_mask, mem_mask = _masks()
    out, self_w, cross_w = block(torch.randn(3, 6, 16), torch.randn(3, 7, 16), attention_mask=tgt_mask,
                                 memory_mask=mem_mask, return_weights=True)
    assert out.shape == (3, 6, 16) and self_w.shape == (3, 4, 6, 6) and cross_w.shape == (3, 4, 6, 7)
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(3, 4, 6), atol=1e-6, rtol=0)
    assert torch.all(cross_w.masked_select((mem_mask == 0)[:, None, None, :].expand_as(cross_w)) == 0)
    assert torch.all(self_w.triu(1) == 0)  # masked for autoregression


@given(st.integers(2, 8), st.integers(0, 7), st.sampled_from(["post", "pre"]))
def test_position_i_ignores_later_target_tokens(t, i, norm):
    i = min(i, t - 2)
    block = DecoderBlock(BlockSpec(8, 2, 16, norm=norm, activation="relu")).eval()
    x, memory = torch.randn(2, t, 8), torch.randn(2, 5, 8)
    x2 = x.clone()
    x2[:, i + 1:] = torch.randn_like(x2[:, i + 1:])
    torch.testing.assert_close(block(x, memory)[:, : i + 1], block(x2, memory)[:, : i + 1], atol=1e-6, rtol=0)


def test_a_padded_memory_position_changes_nothing():
    block = DecoderBlock(BlockSpec(8, 2, 16, norm="post", activation="relu")).eval()
    x, memory = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    changed = memory.clone()
    changed[0, 3:] = 100.0
    torch.testing.assert_close(block(x, memory, memory_mask=mask), block(x, changed, memory_mask=mask), atol=1e-6,
                               rtol=0)


def test_bad_input_is_named():
    block = DecoderBlock(BlockSpec(8, 2, 16, norm="post", activation="relu"))
    with pytest.raises(ValueError, match="memory"):
        block(torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match="memory must have shape"):
        block(torch.randn(1, 3, 8), torch.randn(1, 3, 7))
    with pytest.raises(ValueError, match=r"^BlockSpec: norm must be 'post' or 'pre', got 'yes'$"):
        DecoderBlock(BlockSpec(8, 2, 16, norm="yes"))


@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_cross_attention_rows_sum_to_one_and_skip_padding(b, t, s, seed):
    g = torch.Generator().manual_seed(seed)
    block = DecoderBlock(BlockSpec(8, 2, 16, norm="post", activation="relu")).eval()
    mem_mask = (torch.rand(b, s, generator=g) > 0.4).long()
    mem_mask[:, 0] = 1  # every source has a real token
    _, self_w, cross_w = block(torch.randn(b, t, 8, generator=g), torch.randn(b, s, 8, generator=g),
                               memory_mask=mem_mask, return_weights=True)
    torch.testing.assert_close(cross_w.sum(-1), torch.ones(b, 2, t), atol=1e-6, rtol=0)
    torch.testing.assert_close(self_w.sum(-1), torch.ones(b, 2, t), atol=1e-6, rtol=0)
    assert torch.all(cross_w[(mem_mask == 0)[:, None, None, :].expand_as(cross_w)] == 0)
