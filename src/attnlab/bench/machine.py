"""The machine's own limits, measured: what fraction of them does attention reach?

* fp32 matrix multiply: GFLOP/s of a large square ``torch.mm`` (``2 n³`` FLOPs), the best rate a
  dense kernel can hope for on this CPU with torch's BLAS;
* memory bandwidth: GB/s of a large ``Tensor.copy_`` (each byte read once and written once);
* read bandwidth: GB/s of a large ``Tensor.sum`` (each byte read once): the limit of decoding, which streams the
  weights once per token.

Both use torch's default thread count, like the attention cases.
"""

from __future__ import annotations

import os
import platform
import statistics
import timeit
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class MachineFacts:
    cpu: str
    cores: int
    torch_threads: int
    memory_gib: float
    python: str
    torch: str
    numpy: str

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        """One line for a results file."""
        return (f"CPU: {self.cpu}, {self.cores} logical cores, {self.memory_gib} GiB; torch threads: "
                f"{self.torch_threads}; Python {self.python}, torch {self.torch}, numpy {self.numpy}")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def total_memory_bytes() -> int:
    """Physical memory in bytes (``sysconf``; Linux and macOS)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def machine_facts() -> MachineFacts:
    import numpy as np
    import torch

    return MachineFacts(cpu=cpu_model(), cores=os.cpu_count() or 1, torch_threads=torch.get_num_threads(),
                        memory_gib=round(total_memory_bytes() / 2**30, 1), python=platform.python_version(),
                        torch=torch.__version__, numpy=np.__version__)


@dataclass(frozen=True)
class Limit:
    """A measured rate. ``value`` is the best of the repeats: a limit is what the machine *can* do,
    and on a shared machine the slower repeats measure the neighbours. ``median`` and ``low`` show the spread."""

    value: float
    median: float
    low: float
    unit: str
    what: str

    def as_dict(self) -> dict:
        return asdict(self)


def _times(fn, repeats: int) -> list[float]:
    fn()  # warm-up: first-touch page faults, thread-pool start-up
    return timeit.Timer(fn).repeat(repeat=repeats, number=1)


def matmul_gflops(n: int = 4096, repeats: int = 5, dtype: str = "fp32") -> Limit:
    """GFLOP/s of ``torch.mm`` on two ``(n, n)`` matrices of ``dtype`` (a name of ``attnlab.models.DTYPES``)."""
    import torch

    from attnlab.models.config import DTYPES

    torch_dtype = DTYPES[dtype]
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=g).to(torch_dtype) for _ in range(2))
    out = torch.empty(n, n, dtype=torch_dtype)
    rates = [2 * n**3 / t / 1e9 for t in _times(lambda: torch.mm(a, b, out=out), repeats)]
    return Limit(max(rates), statistics.median(rates), min(rates), "GFLOP/s", f"torch.mm {dtype} {n}x{n}")


def read_bandwidth(mib: int = 512, repeats: int = 5) -> Limit:
    """GB/s of summing a ``mib``-MiB fp32 tensor: each byte read once, nothing written. What a decoding step that
    streams every weight once can hope for: its tokens/s limit is this over the bytes of the weights."""
    import torch

    src = torch.ones(mib * 2**20 // 4)
    nbytes = src.numel() * 4
    rates = [nbytes / t / 1e9 for t in _times(lambda: src.sum(), repeats)]
    return Limit(max(rates), statistics.median(rates), min(rates), "GB/s", f"Tensor.sum over {mib} MiB fp32")


def memory_bandwidth(mib: int = 512, repeats: int = 5) -> Limit:
    """GB/s of copying a ``mib``-MiB fp32 tensor into another (read + write counted)."""
    import torch

    src = torch.ones(mib * 2**20 // 4)
    dst = torch.empty_like(src)
    nbytes = 2 * src.numel() * 4
    rates = [nbytes / t / 1e9 for t in _times(lambda: dst.copy_(src), repeats)]
    return Limit(max(rates), statistics.median(rates), min(rates), "GB/s", f"Tensor.copy_ of {mib} MiB fp32")
