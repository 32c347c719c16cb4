"""Our TransformerBlock against torch.nn.TransformerEncoderLayer (a block assembled by torch)."""

import pytest
import torch
import torch.nn.functional as F

from attnlab.layers import BlockSpec, TransformerBlock
from references import torch_block


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize(("act_name", "act"), [("relu", F.relu), ("gelu", F.gelu)])
def test_equals_torch_encoder_layer(norm, is_causal, act_name, act):
    torch.manual_seed(1)
    ours = TransformerBlock(BlockSpec(32, 4, 64, norm=norm, is_causal=is_causal, activation=act_name)).eval()
    with torch.no_grad():  # non-trivial LayerNorm parameters
        for ln in (ours.ln1, ours.ln2):
            ln.weight.normal_(1.0, 0.3)
            ln.bias.normal_(0.0, 0.3)
    ref = torch_block(ours, norm, act)
    x = torch.randn(3, 7, 32)
    keep = torch.ones(3, 7, dtype=torch.long)
    keep[1, 5:] = 0
    keep[2, 2:] = 0
    mask = torch.ones(7, 7, dtype=torch.bool).triu(1) if is_causal else None  # nn convention: True = blocked
    with torch.no_grad():
        want = ref(x, src_mask=mask, src_key_padding_mask=keep == 0, is_causal=is_causal)
        got, w = ours(x, keep, return_weights=True)
        fast = ours(x, keep)
    real = keep.bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-6, rtol=0)
    torch.testing.assert_close(fast[real], want[real], atol=1e-6, rtol=0)
    assert w.shape == (3, 4, 7, 7)
    assert torch.all(w[2, :, :, 2:] == 0)  # padded keys get no weight
    if is_causal:
        assert torch.all(w.triu(diagonal=1) == 0)


def test_bad_norm():
    with pytest.raises(ValueError, match="norm must be 'post' or 'pre'"):
        TransformerBlock(BlockSpec(8, 2, 16, norm="sandwich"))
