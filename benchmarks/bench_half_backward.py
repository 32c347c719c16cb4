"""Training attention in bfloat16 on the CPU: torch's fused kernel in bfloat16, against the same call cast to float32.

    .venv/bin/python benchmarks/bench_half_backward.py           # 64 to 1,024 keys, head_dim 32 and 64 (≈ 30 s)
    .venv/bin/python benchmarks/bench_half_backward.py --quick   # a smoke test: two shapes

A causal self-attention, forward and backward, as a training step runs it under ``--dtype bf16``: query, key and
value in bfloat16 with gradients. Three ways, interleaved in rounds, each the median of its calls:

* ``float32``: the call in float32 (what an fp32 run pays);
* ``bfloat16``: ``torch.nn.functional.scaled_dot_product_attention`` on the bfloat16 tensors;
* ``via float32``: the bfloat16 tensors cast to float32, the call, the output cast back (the casts' backward too).

At few keys torch's bfloat16 backward was measured slower than the float32 one, and the casts cost little, so
below :data:`attnlab.fast.attention.CPU_HALF_BACKWARD_FLOAT32_BELOW` keys the fast attention
(:class:`attnlab.fast.attention.FastAttention`, what ``accelerate`` and the trainer swap in) computes such a call to
torch's kernel in float32 on the CPU; the plain module calls it as it is. This is the measurement behind that
number. Writes ``benchmarks/results/half_backward.md`` (``--out``: elsewhere).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab.bench.machine import machine_facts
from attnlab.fast.attention import CPU_HALF_BACKWARD_FLOAT32_BELOW
from attnlab.files import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "half_backward.md"
SHAPES = [(12, 4, 64, 32), (12, 4, 64, 64), (8, 6, 128, 32), (24, 6, 128, 32), (8, 12, 256, 64), (12, 4, 256, 32),
          (4, 12, 512, 64), (2, 12, 1024, 64)]  # (B, H, T, head_dim); the first is the baby preset's
QUICK_SHAPES = [(12, 4, 64, 32), (2, 4, 512, 32)]


def step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad: torch.Tensor, via_float32: bool) -> None:
    """One forward and backward of causal attention on leaves ``q``, ``k``, ``v``."""
    if via_float32:
        out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True).to(q.dtype)
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.backward(grad)


def measure(shape: tuple[int, ...], rounds: int) -> dict[str, float]:
    """Milliseconds per forward + backward of each way: per way, the median over ``rounds`` interleaved rounds of
    the median of a few calls."""
    g = torch.Generator().manual_seed(0)
    base = [torch.randn(shape, generator=g) for _ in range(4)]
    leaves = {dtype: [t.to(dtype).requires_grad_() for t in base[:3]] + [base[3].to(dtype)]
              for dtype in (torch.float32, torch.bfloat16)}
    ways = {"float32": (torch.float32, False), "bfloat16": (torch.bfloat16, False),
            "via float32": (torch.bfloat16, True)}
    calls = max(3, int(2e8 // (shape[0] * shape[1] * shape[2] ** 2 * shape[3])))
    times: dict[str, list[float]] = {name: [] for name in ways}
    for r in range(rounds + 1):
        for name, (dtype, via) in ways.items():
            runs = []
            for _ in range(calls):
                start = time.perf_counter()
                step(*leaves[dtype], via)
                runs.append(time.perf_counter() - start)
            if r:  # round 0 warms up
                times[name].append(statistics.median(runs))
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def row(shape: tuple[int, ...], rounds: int) -> str:
    """The table's row for ``shape``, printed as it is measured."""
    r = measure(shape, rounds)
    line = (f"| {', '.join(map(str, shape))} | {r['float32']:.2f} | {r['bfloat16']:.2f} | {r['via float32']:.2f} | "
            f"{r['bfloat16'] / r['via float32']:.2f} |")
    print(line, flush=True)
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two shapes, two rounds: a smoke test")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the table goes")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per shape (default 5)")
    args = parser.parse_args()
    shapes, rounds = (QUICK_SHAPES, 2) if args.quick else (SHAPES, args.rounds)
    head = ["# Training attention in bfloat16 on the CPU" + (" (--quick: a smoke test, not a measurement)"
                                                             if args.quick else ""),
            "", machine_facts().summary(), "",
            "Command: `" + " ".join(["benchmarks/bench_half_backward.py", *sys.argv[1:]]) + "`. Causal "
            "`scaled_dot_product_attention`, forward + backward, ms per call (median of interleaved rounds). "
            "\"bfloat16 / via float32\" above 1: casting to float32 is faster. attnlab's fast attention computes in "
            f"float32 below {CPU_HALF_BACKWARD_FLOAT32_BELOW} keys.", "",
            "| B, H, T, head_dim | float32 | bfloat16 | via float32 | bfloat16 / via float32 |",
            "|---|---|---|---|---|"]
    atomic_write_text(args.out, "\n".join([*head, *(row(shape, rounds) for shape in shapes)]) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
