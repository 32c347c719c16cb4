import pytest
import torch

from attnlab.fast import accelerated
from attnlab.fast.packed import PackedLinear, onednn_available
from attnlab.models import EncoderConfig, TransformerEncoder


def small():
    torch.manual_seed(0)
    config = EncoderConfig(vocab_size=100, context_length=16, d_model=32, num_layers=2, num_heads=4)
    return TransformerEncoder(config).eval()


def test_padding_does_not_change_real_tokens():
    enc = small()
    ids = torch.randint(1, 100, (2, 6))
    short = enc(ids).last_hidden_state
    padded_ids = torch.cat([ids, torch.zeros(2, 5, dtype=torch.long)], 1)
    mask = torch.cat([torch.ones(2, 6), torch.zeros(2, 5)], 1).long()
    out = enc(padded_ids, attention_mask=mask, return_weights=True, return_hidden_states=True)
    torch.testing.assert_close(out.last_hidden_state[:, :6], short, atol=1e-5, rtol=0)
    assert len(out.hidden_states) == 3 and len(out.attentions) == 2
    assert torch.all(out.attentions[0][..., 6:] == 0)  # no weight on padding
    torch.testing.assert_close(out.sentence_embedding(), enc(ids).sentence_embedding(), atol=1e-5, rtol=0)


def test_bidirectional_and_token_types():
    enc = small()
    ids = torch.randint(1, 100, (1, 8))
    other = ids.clone()
    other[0, -1] = (other[0, -1] + 1) % 100
    assert not torch.allclose(enc(ids).last_hidden_state[:, 0], enc(other).last_hidden_state[:, 0])  # sees ahead
    types = torch.zeros_like(ids)
    torch.testing.assert_close(enc(ids, token_type_ids=types).last_hidden_state, enc(ids).last_hidden_state,
                               atol=1e-6, rtol=0)
    assert not torch.allclose(enc(ids, token_type_ids=1 - types).last_hidden_state, enc(ids).last_hidden_state)


def test_packed_inference_path_equals_plain():
    """The fast twin of an encoder packs every linear map (oneDNN's packed weights): the same hidden states."""
    enc = small()
    fast = accelerated(enc)
    packed = [m for m in fast.modules() if isinstance(m, PackedLinear)]
    assert len(packed) == sum(isinstance(m, torch.nn.Linear) for m in enc.modules()) > 0
    assert not any(isinstance(m, PackedLinear) for m in enc.modules())  # the model itself is left as it is
    ids = torch.randint(0, 100, (3, 9))
    with torch.no_grad():
        want = enc(ids).last_hidden_state
        got = fast(ids).last_hidden_state
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert all(m._packed is not None for m in packed) or not onednn_available()  # the packed path ran


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"input_ids": torch.tensor([[1, 100]])}, r"token ids must be in \[0, vocab_size=100\)"),
    ({"input_ids": torch.ones(1, 17, dtype=torch.long)}, "exceed the model's context_length=16"),
    ({"input_ids": torch.ones(2, 3, dtype=torch.long), "attention_mask": torch.ones(2, 4, dtype=torch.long)},
     r"attention_mask must have the shape of input_ids \(2, 3\)"),
    ({"input_ids": torch.ones(1, 3, dtype=torch.long), "token_type_ids": torch.full((1, 3), 2)},
     r"token_type_ids.*\[0, vocab_size=2\)"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        small()(**kwargs)
