"""How fast the few-row fp32 product reads its weights: attnlab's kernel against ``F.linear`` and a plain sum.

    .venv/bin/python benchmarks/bench_linear.py            # gpt2-small's shapes, 1 and 2 threads (≈ 20 s)
    .venv/bin/python benchmarks/bench_linear.py --quick    # a smoke test: two small shapes

A decoding step multiplies each weight matrix by one row per sequence, so its speed is the speed at which the
weights stream from memory. For each of gpt2-small's weight shapes this reads many distinct matrices of that shape
(more bytes than the caches hold) three ways, in turns: ``Tensor.sum`` of each (what reading the bytes costs),
``torch.ops.attnlab_cpu.fp32_linear`` (attnlab's kernel, :mod:`attnlab.fast.kernels`) and ``F.linear``, with
x of 1 and of 8 rows (``--rows``). Reported: GB/s of weights read, the best of the rounds, and the kernel's rate
over the sum's. Writes ``benchmarks/results/linear.md`` (``--out``: elsewhere).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab.bench.machine import machine_facts
from attnlab.fast import kernels
from attnlab.files import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "linear.md"
#: gpt2-small's maps: q/k/v stacked, the attention's output, the feed-forward's two, the tied head
GPT2_SHAPES = [(2304, 768), (768, 768), (3072, 768), (768, 3072), (50257, 768)]


def rates(shape: tuple[int, int], rows: int, rounds: int, megabytes: int) -> dict[str, float]:
    """GB/s of weights read by each way, the best of ``rounds`` interleaved rounds."""
    count = max(2, megabytes * 2**20 // (shape[0] * shape[1] * 4))
    weights = [torch.randn(shape) for _ in range(count)]
    x = torch.randn(rows, shape[1])
    ways = {"sum": lambda w: w.sum(), "attnlab": lambda w: torch.ops.attnlab_cpu.fp32_linear(x, w, None),
            "F.linear": lambda w: F.linear(x, w)}
    nbytes, best = sum(w.numel() * 4 for w in weights), dict.fromkeys(ways, 0.0)
    for _ in range(rounds):
        for name, way in ways.items():
            start = time.perf_counter()
            for w in weights:
                way(w)
            best[name] = max(best[name], nbytes / (time.perf_counter() - start) / 1e9)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two small shapes, few rounds: a smoke test")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--megabytes", type=int, default=256, help="weights read per shape and way")
    parser.add_argument("--rows", default="1,8", help="rows of x, comma-separated (a batch decodes up to 8)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the table goes")
    args = parser.parse_args()
    if not kernels.load():
        raise SystemExit(f"attnlab's CPU kernels are not in use here: {kernels.status()} (`attnlab kernels` builds "
                         "them)")
    shapes = [(96, 64), (64, 192)] if args.quick else GPT2_SHAPES
    rounds, megabytes = (2, 8) if args.quick else (args.rounds, args.megabytes)
    threads = sorted({1, torch.get_num_threads()})
    lines = ["# The few-row fp32 product" + (" (--quick: a smoke test, not a measurement)" if args.quick else ""),
             "", machine_facts().summary(), "",
             "Command: `" + " ".join(["benchmarks/bench_linear.py", *sys.argv[1:]]) + "`. "
             f"GB/s of weights read, best of {rounds} interleaved rounds over {megabytes} MB of distinct weights per "
             "shape; \"attnlab / sum\": the kernel's rate over a plain sum of the same weights.", "",
             "| threads | weight (N, K) | rows of x | sum | attnlab | F.linear | attnlab / sum |",
             "|---|---|---|---|---|---|---|"]
    for n in threads:
        torch.set_num_threads(n)
        for shape in shapes:
            for rows in map(int, args.rows.split(",")):
                r = rates(shape, rows, rounds, megabytes)
                lines.append(f"| {n} | {shape} | {rows} | {r['sum']:.1f} | {r['attnlab']:.1f} | {r['F.linear']:.1f} "
                             f"| {r['attnlab'] / r['sum']:.2f} |")
                print(lines[-1], flush=True)
    atomic_write_text(args.out, "\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
