"""attnlab's int8 CPU kernel (``fast/kernels``) against a float64 product written here: every path through it
(a block of four rows of W for one x row, one row of a block against up to four x rows, K and N not multiples of
the layout's 16 and 4, the widened blocks for a prompt), the packed layout, the same bits on any number of threads
and at any batch size, torch.compile, and the fallbacks."""

import pytest
import torch

from attnlab.fast import kernels
from attnlab.fast.quantized_linear import KERNEL_ROWS, Int8Linear, QuantizedLinear, pack_int8, unpack_int8

pytestmark = pytest.mark.usefixtures("cpu_kernels")


def reference(x, q):
    """``x (M, K)`` times the int8 weight and its scales, in float64."""
    return (x.double() @ q.codes().double().t()) * q.scales.double()


def case(m, n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g), Int8Linear(torch.randn(n, k, generator=g))


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 8, 9, 17, 40, KERNEL_ROWS, KERNEL_ROWS + 1])
@pytest.mark.parametrize(("n", "k"), [(37, 45), (64, 768), (5, 8), (13, 3), (1030, 32)])
def test_kernel_is_the_float64_product(m, n, k):
    """fp32 sums of K products: within 1e-5 of the largest output (the float64 sum is exact to far better)."""
    x, q = case(m, n, k)
    want = reference(x, q)
    got = q.matmul(x)
    assert got.dtype == torch.float32 and got.shape == (m, n)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5 * want.abs().max().item())


@pytest.mark.parametrize(("n", "k"), [(8, 16), (37, 45), (1, 3), (1030, 32)])
def test_the_packed_layout_holds_every_code_once(n, k):
    """pack_int8 moves each code to its place in the kernel's layout and pads with zeros; unpack_int8 undoes it."""
    codes = torch.randint(-127, 128, (n, k), dtype=torch.int8)
    packed = pack_int8(codes)
    assert packed.shape == (-(-n // 4) * 4, -(-k // 16) * 16)
    assert torch.equal(unpack_int8(packed, n, k), codes)
    assert packed.to(torch.int64).abs().sum() == codes.to(torch.int64).abs().sum()  # the padding is zeros
    # block b, chunk c is one 64-byte line: rows 4b..4b+3 of W, inputs 16c..16c+15, row after row
    if n >= 8 and k >= 32:
        line = packed.flatten()[(1 * (-(-k // 16)) + 1) * 64:][:64].reshape(4, 16)
        assert torch.equal(line, codes[4:8, 16:32])


def test_the_op_is_called_for_decoding_rows(monkeypatch):
    """Up to KERNEL_ROWS rows go through the kernel (not a fallback that would pass the test above as well)."""
    calls = []
    op = torch.ops.attnlab_cpu.int8_linear
    monkeypatch.setattr("attnlab.fast.quantized_linear.torch.ops.attnlab_cpu",
                        type("Ops", (), {"int8_linear": staticmethod(lambda *a: calls.append(1) or op(*a))}))
    x, q = case(3, 16, 24)
    q.matmul(x)
    assert calls == [1]


@pytest.mark.parametrize("m", [1, 3, 8])
def test_the_same_bits_on_one_thread_and_on_two(m):
    """Each output is summed by one thread in one order, whatever the split: no dependence on the machine's cores."""
    x, q = case(m, 999, 203, seed=3)  # 203: a tail of K mod 8 inputs on every path
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = q.matmul(x)
        torch.set_num_threads(2)
        two = q.matmul(x)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)
    assert torch.equal(q.matmul(x[-1:]), one[-1:])  # a row alone or in a batch: summed alike


@pytest.mark.parametrize("shape", [(64,), (1, 64), (5, 64), (2, 3, 64)])
@pytest.mark.parametrize("bias", [True, False])
def test_the_forward_s_short_path_is_the_checked_path(shape, bias):
    """A decoding step's forward hands x (..., K) and the bias to the kernel: the same shape and bits as the
    product and the bias added by torch."""
    g = torch.Generator().manual_seed(6)
    q = Int8Linear(torch.randn(40, 64, generator=g), torch.randn(40, generator=g) if bias else None)
    x = torch.randn(*shape, generator=g)
    fast = q(x)
    assert fast.shape == (*shape[:-1], 40)
    assert torch.equal(fast, QuantizedLinear.forward(q, x))


def test_bf16_inputs_run_the_fp32_kernel_and_come_back_in_bf16():
    x, q = case(2, 33, 64, seed=4)
    y = q(x.bfloat16())
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, q(x.bfloat16().float()).bfloat16(), rtol=0, atol=0)


def test_torch_compile_traces_the_kernel():
    """The op has a shape function (``register_fake``): a compiled model calls the same kernel."""
    x, q = case(2, 48, 64, seed=5)
    compiled = torch.compile(lambda t: q(t) * 2, fullgraph=True)  # fullgraph: no break around the op; ×2: exact
    torch.testing.assert_close(compiled(x), q(x) * 2, rtol=0, atol=0)


def test_bad_arguments_are_named_by_the_kernel():
    x, q = case(1, 8, 40)
    with pytest.raises(RuntimeError, match=r"x has 15 features and scales 8 rows, so the packed weight must be "
                                           r"\(8, 16\), got \(8, 48\)"):
        torch.ops.attnlab_cpu.int8_linear(x[:, :15], q.weight, q.scales)
    with pytest.raises(RuntimeError, match="weight must be a contiguous"):
        torch.ops.attnlab_cpu.int8_linear(x, q.weight.float(), q.scales)


def test_without_the_kernels_the_int8_map_gives_the_same_numbers(monkeypatch):
    """Not built (or turned off): torch's kernels, the same numbers; the codes kept row by row."""
    monkeypatch.setattr(kernels, "_state", {"tried": True, "ready": False, "why": "they are not built"})
    monkeypatch.setattr(kernels, "READY", [False])
    x, q = case(2, 8, 16)
    assert not q.packed
    torch.testing.assert_close(q.matmul(x).double(), reference(x, q), rtol=1e-5, atol=1e-5)
