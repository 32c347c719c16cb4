"""``fast.linear`` and attnlab's fp32 CPU kernel (``fast/kernels/fp32_linear.cpp``): the float64
product within fp32 rounding on every path through the kernel (blocks of four rows of W, the last rows, inputs past
the last chunk of 16), the same bits for a row alone or in a batch and on any number of threads, which calls go to
the kernel and which to ``F.linear`` (autograd, autocast, many rows, other dtypes), and ``FastLinear`` as a drop-in
``nn.Linear``."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnlab.fast.linear import KERNEL_ROWS, FastLinear, linear

pytestmark = pytest.mark.usefixtures("cpu_kernels")


def op(*args):
    return torch.ops.attnlab_cpu.fp32_linear(*args)


def case(m, n, k, seed=0, bias=True):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, k, generator=g), torch.randn(n, k, generator=g),
            torch.randn(n, generator=g) if bias else None)


def reference(x, w, b):
    y = x.double() @ w.double().t()
    return y if b is None else y + b.double()


def assert_fp32_close(got, want):
    """fp32 sums of K products: within 1e-5 of the largest output (the float64 sum is exact to far better)."""
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5 * want.abs().max().item())


@pytest.mark.parametrize("m", [1, 2, 3, KERNEL_ROWS])
@pytest.mark.parametrize(("n", "k"), [(37, 45), (64, 768), (5, 16), (13, 3), (1030, 32), (1, 1), (768, 3072)])
@pytest.mark.parametrize("bias", [True, False])
def test_the_kernel_is_the_float64_product(m, n, k, bias):
    x, w, b = case(m, n, k, bias=bias)
    got = op(x, w, b)
    assert got.shape == (m, n)
    assert_fp32_close(got, reference(x, w, b))


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, KERNEL_ROWS), n=st.integers(1, 70), k=st.integers(1, 90), seed=st.integers(0, 2**16))
def test_any_shape_is_the_float64_product(m, n, k, seed):
    x, w, b = case(m, n, k, seed)
    assert_fp32_close(op(x, w, b), reference(x, w, b))


@pytest.mark.parametrize("k", [200, 768])  # a batch of 768 inputs is too big to stream: another loop than a row's
def test_a_row_gives_the_same_bits_alone_in_a_batch_and_on_any_number_of_threads(k):
    """Each output is summed in one order: what a decoding batch returns for a row does not depend on the others,
    nor on how the rows of W were split over threads, nor on which of the kernel's loops ran."""
    x, w, b = case(KERNEL_ROWS, 1030, k, seed=3)
    batch = op(x, w, b)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one_thread = op(x, w, b)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(batch, one_thread)
    for i in range(KERNEL_ROWS):
        assert torch.equal(op(x[i : i + 1], w, b), batch[i : i + 1])


def test_x_of_any_rank_keeps_its_leading_shape():
    x, w, b = case(6, 9, 20, seed=4)
    assert torch.equal(op(x.view(2, 3, 20), w, b), op(x, w, b).view(2, 3, 9))
    assert torch.equal(op(x[0], w, b), op(x[:1], w, b)[0])


def test_bad_arguments_are_named_by_the_kernel():
    x, w, b = case(1, 8, 40)
    with pytest.raises(RuntimeError, match=r"x has 15 features, weight \(8, 40\)"):
        op(x[:, :15], w, b)
    with pytest.raises(RuntimeError, match="weight must be a contiguous"):
        op(x, w.t(), b)
    with pytest.raises(RuntimeError, match="bias must be None or"):
        op(x, w, b[:3])


@pytest.fixture
def on_kernel(monkeypatch):
    """``on_kernel(x, w, b)``: whether :func:`linear` ran attnlab's kernel for these tensors (the op spied on)."""
    calls, real = [], torch.ops.attnlab_cpu.fp32_linear.default
    spy = type("Ops", (), {"fp32_linear": type("Op", (), {"default": staticmethod(
        lambda *a: calls.append(1) or real(*a))})})
    monkeypatch.setattr("attnlab.fast.linear.torch.ops.attnlab_cpu", spy)

    def ran(x, w, b=None):
        calls.clear()
        out = linear(x, w, b).detach()
        want = reference(x.detach(), w.detach(), None if b is None else b.detach())
        torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5 * want.abs().max().item())
        return bool(calls)

    return ran


def test_decoding_rows_go_to_the_kernel_and_the_rest_to_torch(on_kernel):
    """The kernel for a few fp32 rows without autograd; F.linear for more rows, for autograd, autocast, other
    dtypes and strided weights. Both answer within fp32 rounding of the float64 product."""
    x, w, b = case(KERNEL_ROWS + 1, 16, 24)
    with torch.no_grad():
        assert on_kernel(x[:KERNEL_ROWS], w) and on_kernel(x[0], w)
        assert not on_kernel(x, w)                                # a prompt: torch's blocked product
        assert not on_kernel(x[:1].double(), w.double())          # fp32 only
        assert not on_kernel(x[:1], w.t().contiguous().t())       # the kernel reads W row by row
        assert on_kernel(x[:1], w, b)
    assert not on_kernel(x[:1], w, b.clone().requires_grad_(True))  # autograd records a bias's F.linear as well
    w.requires_grad_(True)
    assert not on_kernel(x[:1], w)                                # autograd records F.linear
    with torch.no_grad():
        assert on_kernel(x[:1], w)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert linear(x[:1], w).dtype == torch.bfloat16       # autocast computes in bf16: F.linear does


def test_the_gradient_is_torchs():
    x, w, b = case(2, 8, 16, seed=6)
    w.requires_grad_(True)
    linear(x, w, b).sum().backward()
    torch.testing.assert_close(w.grad, x.sum(0).expand(8, 16), rtol=1e-6, atol=1e-6)


def test_linear_is_a_drop_in_nn_linear():
    """The same parameters, state dict and initialisation (from one seed), and the same map to fp32 rounding."""
    torch.manual_seed(0)
    ours = FastLinear(24, 16)
    torch.manual_seed(0)
    theirs = nn.Linear(24, 16)
    assert isinstance(ours, nn.Linear) and ours.state_dict().keys() == theirs.state_dict().keys()
    for name, p in ours.state_dict().items():
        assert torch.equal(p, theirs.state_dict()[name])
    x = torch.randn(3, 24)
    with torch.no_grad():
        assert_fp32_close(ours(x), F.linear(x, theirs.weight, theirs.bias).double())
    assert torch.equal(ours(x), theirs(x))  # with autograd on: F.linear itself


def test_torch_compile_calls_the_kernel_in_one_graph():
    """The op has a shape function: a compiled step keeps it, with no graph break around it (fullgraph)."""
    lin = FastLinear(24, 16).eval()
    x = torch.randn(2, 24)
    with torch.no_grad():
        compiled = torch.compile(lambda t: lin(t) * 2, fullgraph=True)  # ×2: exact
        torch.testing.assert_close(compiled(x), lin(x) * 2, rtol=0, atol=0)
