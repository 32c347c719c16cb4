import math

import pytest
import torch

from attnlab.layers import SwiGLU


@pytest.mark.parametrize(("d_model", "d_ff", "bias"), [(16, 44, False), (8, 8, True), (1, 3, False)])
def test_equals_transformers_llama_mlp(d_model, d_ff, bias):
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaMLP

    config = transformers.LlamaConfig(hidden_size=d_model, intermediate_size=d_ff, mlp_bias=bias, hidden_act="silu",
                                      num_attention_heads=1, num_key_value_heads=1)
    ref = LlamaMLP(config)
    ours = SwiGLU(d_model, d_ff, bias=bias)
    ref.load_state_dict(ours.state_dict())  # Llama's names: the keys map one to one, none missing or extra
    x = torch.randn(2, 5, d_model) * 2
    # 1e-6 absolute plus 1e-6 relative: outputs of a few units, where one float32 ulp is ~2e-7
    torch.testing.assert_close(ours(x), ref(x), atol=1e-6, rtol=1e-6)


def test_hand_worked_numbers():
    # D = d_ff = 1, gate 1, up 3, down 2: x = 1 -> 2 · silu(1) · 3 = 6 · σ(1) = 6 / (1 + e^-1)
    ff = SwiGLU(1, 1)
    with torch.no_grad():
        ff.gate_proj.weight.fill_(1.0)
        ff.up_proj.weight.fill_(3.0)
        ff.down_proj.weight.fill_(2.0)
    out = ff(torch.tensor([[1.0]]))
    torch.testing.assert_close(out, torch.tensor([[6 / (1 + math.exp(-1))]]), atol=1e-6, rtol=0)


def test_the_gate_gates():
    # silu(z) -> 0 as z -> -inf: a strongly negative gate shuts the path whatever up_proj says
    ff = SwiGLU(2, 3)
    with torch.no_grad():
        ff.gate_proj.weight.fill_(-100.0)
    assert ff(torch.ones(1, 2)).abs().max() < 1e-6


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"d_model": 0, "d_ff": 4}, "d_model must be a positive int, got 0"),
    ({"d_model": 4, "d_ff": 2.5}, "d_ff must be a positive int, got 2.5"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SwiGLU(**kwargs)


def test_wrong_width():
    with pytest.raises(ValueError, match=r"last dim 4 \(d_model\), got shape \(2, 5\)"):
        SwiGLU(4, 8)(torch.randn(2, 5))


def test_gelu_gate_is_gemmas_geglu():
    transformers = pytest.importorskip("transformers")
    from transformers.models.gemma2.modeling_gemma2 import Gemma2MLP

    ref = Gemma2MLP(transformers.Gemma2Config(hidden_size=16, intermediate_size=40))
    ours = SwiGLU(16, 40, activation="gelu_tanh")
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(2, 5, 16) * 2
    torch.testing.assert_close(ours(x), ref(x), atol=1e-6, rtol=1e-6)
    with pytest.raises(ValueError, match=r"SwiGLU: activation: expected 'silu' or 'gelu_tanh', got 'relu'"):
        SwiGLU(4, 8, activation="relu")
