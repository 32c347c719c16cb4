import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.layers import RMSNorm


def llama_rmsnorm(d: int, eps: float):
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    return LlamaRMSNorm(d, eps=eps)


def three_norms(d: int, eps: float, g: torch.Generator):
    """Ours, torch.nn.RMSNorm and transformers' LlamaRMSNorm, holding the same random γ."""
    ref = torch.nn.RMSNorm(d, eps=eps)
    with torch.no_grad():
        ref.weight.copy_(torch.randn(d, generator=g))
    ours, llama = RMSNorm(d, eps=eps), llama_rmsnorm(d, eps)
    ours.load_state_dict(ref.state_dict())  # same parameter name as torch and Llama
    llama.load_state_dict(ref.state_dict())
    return ours, ref, llama


@settings(max_examples=25)
@given(d=st.integers(1, 64), eps=st.sampled_from([1e-6, 1e-5, 0.1]), seed=st.integers(0, 2**31 - 1))
def test_equals_torch_and_llama_fp32(d, eps, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 4, d, generator=g) * 3 + 1
    ours, ref, llama = three_norms(d, eps, g)
    # 1e-6 absolute plus 1e-6 relative: γ ~ N(0, 1) makes outputs up to ~10, where one float32 ulp is 1e-6
    for out in (ours(x), ours.formula(x)):  # the fused path and the written-out formula
        torch.testing.assert_close(out, ref(x), atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(out, llama(x), atol=1e-6, rtol=1e-6)


def test_bf16_equals_llama_and_torch_within_its_rounding():
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(4, 7, 64, generator=g) * 3 + 1).bfloat16()
    ours, ref, llama = (m.to(torch.bfloat16) for m in three_norms(64, 1e-6, g))
    out = ours(x)
    assert out.dtype == torch.bfloat16
    # Llama's order (float32 statistics, cast to bf16, then γ): the same two roundings, so the same bits
    torch.testing.assert_close(out, llama(x), atol=0, rtol=0)
    torch.testing.assert_close(ours.formula(x), out, atol=0, rtol=0)
    # torch.nn.RMSNorm rounds once (γ applied in float32), Llama twice. Against the float32 result of the same
    # bf16 inputs each rounding costs at most 2^-8 relative (bf16 keeps 8 significant bits): ours within
    # (1 + 2^-8)² − 1 < 2^-7 + 2^-12, torch within 2^-8 + 2^-12 (2^-12: room for float32's own rounding)
    exact = torch.nn.functional.rms_norm(x.float(), (64,), ref.weight.float(), 1e-6)
    torch.testing.assert_close(out.float(), exact, atol=1e-6, rtol=2**-7 + 2**-12)
    torch.testing.assert_close(ref(x).float(), exact, atol=1e-6, rtol=2**-8 + 2**-12)
    assert not torch.equal(out, ref(x))  # the two orders do round differently somewhere


def test_fp32_weight_with_bf16_input_gives_fp32_like_llama():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 5, 16, generator=g).bfloat16()
    ours, _, llama = three_norms(16, 1e-6, g)
    assert ours(x).dtype == torch.float32  # γ (float32) times the bf16 normalised vector promotes
    torch.testing.assert_close(ours(x), llama(x), atol=0, rtol=0)


def test_hand_worked_numbers():
    # x = [3, 4]: mean(x²) = 12.5, so x / √12.5
    out = RMSNorm(2, eps=1e-12, fused=False)(torch.tensor([3.0, 4.0]))
    r = 12.5**0.5
    torch.testing.assert_close(out, torch.tensor([3 / r, 4 / r]), atol=1e-6, rtol=0)


def test_gradients_match_torch():
    x1 = torch.randn(4, 16, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    ours, ref = RMSNorm(16), torch.nn.RMSNorm(16, eps=1e-6)
    (ours(x1) ** 3).sum().backward()
    (ref(x2) ** 3).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"d_model": 0}, "d_model must be a positive int, got 0"), ({"d_model": 4, "eps": 0}, "eps must be a float > 0"),
    ({"d_model": 4, "eps": -1e-6}, "eps must be a float > 0, got -1e-06"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RMSNorm(**kwargs)


def test_wrong_width():
    with pytest.raises(ValueError, match=r"last dim 4, got shape \(2, 5\)"):
        RMSNorm(4)(torch.randn(2, 5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unit_offset_is_gemmas_norm_bit_for_bit(dtype):
    """(1 + w) in float32, then the cast: Gemma's order, the same bits in bfloat16 too."""
    pytest.importorskip("transformers")
    from transformers.models.gemma2.modeling_gemma2 import Gemma2RMSNorm

    g = torch.Generator().manual_seed(1)
    ours, ref = RMSNorm(48, eps=1e-6, unit_offset=True), Gemma2RMSNorm(48, eps=1e-6)
    assert torch.equal(ours.weight, torch.zeros(48))  # (1 + 0): the identity gain at initialisation
    with torch.no_grad():
        ours.weight.copy_(0.3 * torch.randn(48, generator=g))
    ref.load_state_dict(ours.state_dict())
    ours, ref = ours.to(dtype), ref.to(dtype)
    x = (torch.randn(3, 5, 48, generator=g) * 2).to(dtype)
    torch.testing.assert_close(ours(x), ref(x), atol=0, rtol=0)
    torch.testing.assert_close(ours.formula(x), ref(x), atol=0, rtol=0)
