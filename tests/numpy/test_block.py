import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab import numpy as anp
from attnlab.layers import BlockSpec, TransformerBlock


def _randomise(module: torch.nn.Module) -> None:
    """LayerNorms start at γ=1, β=0: give every parameter a random value so each one is tested."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.3)


@given(st.integers(1, 2), st.integers(1, 7), st.sampled_from(["post", "pre"]), st.booleans(), st.booleans(),
       st.sampled_from(["gelu", "gelu_tanh", "relu"]), st.integers(0, 2**16))
def test_block_equals_torch(b, t, norm, is_causal, padded, activation, seed):
    torch.manual_seed(seed)
    block = TransformerBlock(BlockSpec(16, 4, 32, norm=norm, is_causal=is_causal, activation=activation,
                                       eps=1e-5)).eval()
    _randomise(block)
    x = torch.randn(b, t, 16)
    mask = (torch.rand(b, t) > 0.3).long() if padded else None
    with torch.no_grad():
        want, want_w = block(x, mask, return_weights=True)
    params = anp.state_dict_to_arrays(block.state_dict())
    np_mask = None if mask is None else mask.numpy()
    got = anp.transformer_block(x.numpy(), params, 4, np_mask, norm=norm, is_causal=is_causal, activation=activation)
    np.testing.assert_allclose(got, want.numpy(), atol=1e-5, rtol=0)
    _, got_w = anp.transformer_block(x.numpy(), params, 4, np_mask, norm=norm, is_causal=is_causal,
                                     activation=activation,
                                     return_weights=True)
    np.testing.assert_allclose(got_w, want_w.numpy(), atol=1e-5, rtol=0)


def test_post_and_pre_differ():
    # The same weights give different outputs: the flag really changes where the norm sits.
    block = TransformerBlock(BlockSpec(8, 2, 16)).eval()
    _randomise(block)
    params = anp.state_dict_to_arrays(block.state_dict())
    x = np.random.default_rng(0).standard_normal((1, 3, 8), dtype=np.float32)
    post = anp.transformer_block(x, params, 2, norm="post")
    pre = anp.transformer_block(x, params, 2, norm="pre")
    assert np.abs(post - pre).max() > 0.1


def test_bad_norm():
    with pytest.raises(ValueError, match="norm must be 'post' or 'pre', got 'mid'"):
        anp.transformer_block(np.zeros((1, 2, 8), np.float32), {}, 2, norm="mid")
