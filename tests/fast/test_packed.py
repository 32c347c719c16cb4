"""oneDNN's packed linears (``fast.packed``), an encoder's fast twins: ``F.linear`` to fp32 rounding, the
activation fused once, the parameters and the training path as they were."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlab.fast import accelerate, swap_modules
from attnlab.fast.feedforward import FastFeedForward
from attnlab.fast.packed import PackedLinear, onednn_available
from attnlab.layers import FeedForward
from attnlab.models import EncoderConfig, TransformerEncoder

needs_onednn = pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN")


@needs_onednn
@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("shape", [(1, 48), (5, 48), (3, 7, 48)])
def test_packed_equals_linear(activation, shape):
    torch.manual_seed(0)
    ref = torch.nn.Linear(48, 96)
    packed = PackedLinear.from_linear(ref, activation=activation).eval()
    x = torch.randn(*shape)
    want = F.linear(x, ref.weight, ref.bias)
    want = {"none": want, "relu": F.relu(want), "gelu": F.gelu(want),
            "gelu_tanh": F.gelu(want, approximate="tanh")}[activation]
    with torch.inference_mode():
        got = packed(x)
    assert packed._packed is not None  # the packed path really ran
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(packed(x), want, atol=1e-6, rtol=0)  # with autograd on: plain F.linear


@needs_onednn
def test_repacks_when_the_weight_changes():
    lin = PackedLinear(8, 4).eval()
    x = torch.randn(2, 8)
    with torch.no_grad():
        lin(x)
        lin.weight.mul_(2.0)  # an optimiser step or a load_state_dict writes in place
        torch.testing.assert_close(lin(x), F.linear(x, lin.weight, lin.bias), atol=1e-5, rtol=1e-5)


def test_a_weight_made_under_inference_mode_runs_unpacked_and_follows_its_changes():
    """An inference tensor has no version counter to tell a packed copy it changed: such a weight runs unpacked."""
    x = torch.randn(2, 8)
    with torch.inference_mode():
        lin = PackedLinear(8, 4, activation="relu").eval()
        first = lin(x)
        lin.weight.mul_(-1.0)
        torch.testing.assert_close(lin(x), F.relu(F.linear(x, lin.weight, lin.bias)), atol=1e-6, rtol=0)
    assert not torch.equal(first, lin(x))


def test_an_encoder_made_under_inference_mode_is_accelerated():
    x = torch.randint(0, 50, (2, 8))
    with torch.inference_mode():
        model = TransformerEncoder(EncoderConfig(vocab_size=50, context_length=16, d_model=32, num_heads=4,
                                                 num_layers=2, d_ff=64)).eval()
        expected = model(x).last_hidden_state
        accelerate(model)
        torch.testing.assert_close(model(x).last_hidden_state, expected, atol=1e-5, rtol=0)


def test_an_encoders_feed_forward_is_packed_and_keeps_parameters_state_and_training():
    """A model without causal attention (an encoder) gets packed maps: the first takes over the activation."""
    torch.manual_seed(0)
    holder = nn.ModuleDict({"ff": FeedForward(16, 32, activation="gelu")})
    before = {k: v.clone() for k, v in holder.state_dict().items()}
    x = torch.randn(3, 16)
    want = holder["ff"](x)
    params = list(holder.parameters())
    swap_modules(holder)
    ff = holder["ff"]
    assert type(ff) is FastFeedForward
    assert isinstance(ff.linear1, PackedLinear) and ff.linear1.activation == "gelu"
    assert isinstance(ff.linear2, PackedLinear) and ff.linear2.activation == "none"
    assert list(holder.parameters()) == params and holder.state_dict().keys() == before.keys()
    torch.testing.assert_close(ff(x), want, atol=1e-6, rtol=0)  # training path: activation applied once
    with torch.no_grad():
        torch.testing.assert_close(ff.eval()(x), want, atol=1e-5, rtol=1e-5)
    ff.train()(x).sum().backward()
    assert all(p.grad is not None for p in ff.parameters())


def test_bad_activation():
    with pytest.raises(ValueError, match="activation"):
        PackedLinear(4, 4, activation="swish")
