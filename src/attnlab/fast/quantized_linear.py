"""Weight-only quantized linear maps: the weight stored in 8 or 4 bits, the activations left in floating point.

Decoding one token is a matrix-vector product per weight matrix, so its speed is how fast the weights stream from
memory: int8 weights are a quarter of fp32's bytes, int4 an eighth. Each output row ``n`` of ``W (N, K)`` keeps a
scale (int8: one per row; int4: one scale and one offset per group of ``group_size`` inputs):

    int8 (symmetric, per row):   q = round(W / s),  s = max|W[n]| / 127,           W ≈ q · s
    int4 (asymmetric, per group): q = round((W − m) / s) ∈ [0, 15],  s = (max − min) / 15,  W ≈ q · s + m

The products read the small weights and scale inside the kernel. int8 on a CPU runs attnlab's own AVX2 kernel
(:mod:`attnlab.fast.kernels`, built by ``attnlab kernels build``): torch's int8 kernel (``aten._weight_int8pack_mm``)
ran 15 times slower at one row on an AVX-512 Xeon with VNNI; where ours is not built, torch's is used on AVX-512 and
elsewhere the int8 weight is converted to the input's dtype and multiplied (the same numbers;
:func:`int8_kernel_pays`). int4 runs ``aten._weight_int4pack_mm_for_cpu`` with bfloat16 activations: given fp32
ones, that kernel ran 27-34 times slower (4.2 against 0.12-0.16 ms for a 3072 × 768 map at one row, same Xeon).
Why not torchao: see docs/decoding.md.

These maps hold no trainable parameters: they are for inference. A forward pass in training mode with autograd on
(a training step) is refused.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.arguments import plain
from attnlab.fast.kernels import load as load_kernels
from attnlab.fast.kernels import ready as kernels_ready

INT4_GROUP_SIZES = (32, 64, 128, 256)  # what torch's int4 kernel packs
# attnlab's int8 kernel serves up to this many rows of x (decoding, a prompt); a longer prompt widens W block by
# block and runs torch's matmul, faster from about here on (measured: a 3072 × 768 map, 128 rows: 7.4 ms the kernel,
# 7.0 ms widened; 32 rows: 1.8 ms and 3.7 ms)
KERNEL_ROWS = 128
WIDEN_BLOCK = 1024  # rows of W (a multiple of 4) widened to fp32 at a time: a few MiB, in cache when read
TRAINING_MESSAGE = ("{owner}: a weight-only quantized model is for inference; it cannot be trained (train the "
                    "floating-point model, then quantize it)")


class QuantizedLinear(nn.Module):
    """What the int8 and int4 maps share: the bias, the shapes, the refusal to train. ``(..., K)`` -> ``(..., N)``."""

    bias: Tensor | None  # a buffer, registered in __init__ (None: no bias)

    def __init__(self, in_features: int, out_features: int, bias: Tensor | None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("bias", None if bias is None else bias.detach().clone())
        self.training = False

    def dequantized(self) -> Tensor:
        """The weight ``(N, K)`` in fp32 as the kernel sees it (what the tests compare against)."""
        raise NotImplementedError

    def matmul(self, x: Tensor) -> Tensor:
        """``x (M, K)`` -> ``(M, N)``, without the bias."""
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        if self.training and torch.is_grad_enabled():  # a training step: there is nothing here to train
            raise ValueError(plain(TRAINING_MESSAGE, owner=type(self).__name__))
        if x.shape[-1] != self.in_features:
            raise ValueError(f"{type(self).__name__}: x must have last dim {self.in_features}, got shape "
                             f"{tuple(x.shape)}")
        y = self.matmul(x.reshape(-1, self.in_features)).reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def weight_bytes(self) -> int:
        """Bytes a product reads: the quantized weight and its scales."""
        return sum(b.numel() * b.element_size() for name, b in self.named_buffers() if name != "bias")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _has_op(name: str) -> bool:
    return hasattr(torch.ops.aten, name)


# asked once: a compiled step cannot ask it (torch.compile does not trace a function that returns a string)
_INT8_KERNEL_VECTORIZED = torch.backends.cpu.get_cpu_capability() == "AVX512" and _has_op("_weight_int8pack_mm")


def int8_kernel_pays() -> bool:
    """Whether torch's int8 weight kernel is vectorized on this CPU: it is for AVX-512; elsewhere (AVX2 only) it
    runs a scalar loop, ten times slower than fp32's product (docs/decoding.md), and converting the weight to the
    input's dtype before an ordinary product is faster."""
    return _INT8_KERNEL_VECTORIZED


class Int8Linear(QuantizedLinear):
    """``x Wᵀ + b`` with ``W`` in int8, one fp32 scale per output row (``scales (N,)``).

    ``weight`` holds the int8 codes: ``(N, K)`` row by row, or, where attnlab's CPU kernel runs them, in the
    kernel's layout (:func:`pack_int8`; ``packed`` says which). :meth:`codes` gives them row by row either way.
    """

    weight: Tensor  # buffers, registered in __init__
    scales: Tensor

    def __init__(self, weight: Tensor, bias: Tensor | None = None) -> None:
        super().__init__(weight.shape[1], weight.shape[0], bias)
        w = weight.detach().float()
        scales = w.abs().amax(dim=1).clamp(min=1e-12) / 127  # (N,): a zero row keeps a tiny scale, not 0/0
        self.store(torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8), scales)

    def store(self, codes: Tensor, scales: Tensor) -> None:
        """Keep ``codes (N, K)`` and ``scales (N,)``: as the kernel reads them where it runs (built once per machine,
        loaded once per process), row by row elsewhere."""
        self.packed = codes.device.type == "cpu" and load_kernels()
        self.register_buffer("weight", pack_int8(codes) if self.packed else codes)
        self.register_buffer("scales", scales)

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Int8Linear:
        return cls(linear.weight, linear.bias)

    @classmethod
    def stack(cls, *maps: Int8Linear) -> Int8Linear:
        """One map whose outputs are ``maps``' side by side: their codes and scales stacked, not quantized again, so
        each output is the same number as before (what :mod:`attnlab.attention.fused` keeps for q, k and v)."""
        width = sum(m.out_features for m in maps)
        bias = None
        if any(m.bias is not None for m in maps):
            bias = torch.cat([m.scales.new_zeros(m.out_features) if m.bias is None else m.bias for m in maps])
        stacked = cls.__new__(cls)
        QuantizedLinear.__init__(stacked, maps[0].in_features, width, bias)
        stacked.store(torch.cat([m.codes() for m in maps]), torch.cat([m.scales for m in maps]))
        return stacked

    def codes(self, start: int = 0, stop: int | None = None) -> Tensor:
        """Rows ``start:stop`` of the int8 codes ``(N, K)``, row by row (``start`` a multiple of 4)."""
        stop = self.out_features if stop is None else min(stop, self.out_features)
        if not self.packed:
            return self.weight[start:stop]
        return unpack_int8(self.weight[start: -(-stop // 4) * 4], stop - start, self.in_features)

    def dequantized(self) -> Tensor:
        return self.codes().float() * self.scales[:, None]

    def forward(self, x: Tensor) -> Tensor:
        # decoding's path, as little host work as a step allows: fp32 rows on the CPU straight to the kernel, which
        # takes (..., K), scales and adds the bias itself; anything else goes the checked way
        if (self.packed and x.dtype is torch.float32 and x.is_cpu and self.scales.dtype is torch.float32
                and not (self.training and torch.is_grad_enabled()) and x.shape[-1] == self.in_features
                and x.numel() <= KERNEL_ROWS * self.in_features and kernels_ready()):
            return torch.ops.attnlab_cpu.int8_linear.default(x, self.weight, self.scales, self.bias)
        return super().forward(x)

    def matmul(self, x: Tensor) -> Tensor:
        if self.packed and x.device.type == "cpu" and kernels_ready():
            return own_kernel_product(x, self)
        if x.device.type == "cpu" and x.dtype in (torch.float32, torch.bfloat16) and int8_kernel_pays():
            return torch.ops.aten._weight_int8pack_mm(x.contiguous(), self.codes(), self.scales.to(x.dtype))
        return F.linear(x, self.codes().to(x.dtype)) * self.scales.to(x.dtype)  # the same numbers, converted first


def pack_int8(codes: Tensor) -> Tensor:
    """The int8 codes ``(N, K)`` in the layout attnlab's kernel streams (``int8_linear.cpp``): rows in blocks of
    four, and in a block the four rows' next 16 inputs side by side, a 64-byte line at a time; zero rows and
    inputs pad ``N`` and ``K`` up to multiples of 4 and 16. ``(N, K)`` -> ``(⌈N/4⌉·4, ⌈K/16⌉·16)``."""
    n, k = codes.shape
    blocks, chunks = -(-n // 4), -(-k // 16)
    padded = F.pad(codes, (0, chunks * 16 - k, 0, blocks * 4 - n))
    return padded.reshape(blocks, 4, chunks, 16).transpose(1, 2).contiguous().reshape(blocks * 4, chunks * 16)


def unpack_int8(packed: Tensor, n: int, k: int) -> Tensor:
    """:func:`pack_int8` undone: the first ``n`` rows and ``k`` inputs, row by row."""
    rows, width = packed.shape
    return packed.reshape(rows // 4, width // 16, 4, 16).transpose(1, 2).reshape(rows, width)[:n, :k]


def own_kernel_product(x: Tensor, linear: Int8Linear) -> Tensor:
    """``x (M, K)`` times the packed int8 map with attnlab's kernel, in fp32 (a token's activations are small). Past
    ``KERNEL_ROWS`` rows (a prompt), blocks of W are widened and multiplied by torch's matmul instead."""
    xf, scales = x.float(), linear.scales.float()
    if x.shape[0] <= KERNEL_ROWS:
        return torch.ops.attnlab_cpu.int8_linear(xf, linear.weight, scales).to(x.dtype)
    return torch.cat([F.linear(xf, linear.codes(i, i + WIDEN_BLOCK).float()) * scales[i:i + WIDEN_BLOCK]
                      for i in range(0, linear.out_features, WIDEN_BLOCK)], dim=-1).to(x.dtype)


class Int4Linear(QuantizedLinear):
    """``x Wᵀ + b`` with ``W`` in 4 bits, a scale and an offset per group of ``group_size`` inputs of each row.

    ``weight`` holds the codes as torch's CPU int4 kernel packs them (two a byte), ``scales_and_zeros
    (K / group_size, N', 2)`` each group's scale and offset (the kernel's layout; ``N'``: N rounded up to 16).
    CPU only: the packing is the CPU kernel's.
    """

    weight: Tensor  # buffers, registered in __init__
    scales_and_zeros: Tensor

    def __init__(self, weight: Tensor, bias: Tensor | None = None, group_size: int = 128) -> None:
        n, k = weight.shape
        super().__init__(k, n, bias)
        self.group_size = group_size
        padded = -(-n // 16) * 16  # the kernel packs rows in sixteens: zero rows added, their outputs cut off
        w = F.pad(weight.detach().float().cpu(), (0, 0, 0, padded - n)).reshape(padded, k // group_size, group_size)
        low, high = w.amin(dim=-1, keepdim=True), w.amax(dim=-1, keepdim=True)
        scales = (high - low).clamp(min=1e-6) / 15
        codes = torch.round((w - low) / scales).clamp(0, 15).to(torch.int32).reshape(padded, k)
        # the kernel computes (q − 8) · s + z, so its offset z is the group's minimum plus 8 steps
        zeros = low + 8 * scales
        self.register_buffer("scales_and_zeros", torch.cat([scales, zeros], dim=-1).transpose(0, 1).contiguous())
        self.register_buffer("weight", torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 1))
        self._scales_bf16: Tensor | None = None  # made at the first product, kept (not a buffer: not saved)

    @classmethod
    def from_linear(cls, linear: nn.Linear, group_size: int = 128) -> Int4Linear:
        return cls(linear.weight, linear.bias, group_size)

    def dequantized(self) -> Tensor:
        # the kernel applied to the identity: its rows are the columns of W as the kernel decodes them
        return self.matmul(torch.eye(self.in_features)).t()

    def matmul(self, x: Tensor) -> Tensor:
        """``x (M, K)`` -> ``(M, N)`` in x's dtype, the product computed with bfloat16 activations (torch's int4
        kernel's fast path: its fp32 one is a scalar loop); the weights' own rounding dwarfs bf16's."""
        if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"Int4Linear: runs on the CPU in fp32 or bf16, got {x.dtype} on {x.device}")
        if self._scales_bf16 is None:
            self._scales_bf16 = self.scales_and_zeros.to(torch.bfloat16)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.to(torch.bfloat16).contiguous(), self.weight,
                                                       self.group_size, self._scales_bf16)
        return y[:, : self.out_features].to(x.dtype)


def int4_available() -> bool:
    """Whether this torch build has the CPU int4 kernel."""
    return _has_op("_weight_int4pack_mm_for_cpu") and _has_op("_convert_weight_to_int4pack_for_cpu")
