"""One query against a few cached keys, many times over (a beam search's step): which form of each product is faster.

    .venv/bin/python benchmarks/bench_single_query.py           # 64 to 4,000 rows, 1 to 11 keys (≈ 30 s)
    .venv/bin/python benchmarks/bench_single_query.py --quick   # a smoke test: two sizes

:mod:`attnlab.fast.few_queries` (the decoding steps' kernel of the fast attention, ``attnlab.fast``) computes the
weighted sum of the values elementwise where that wins, and leaves the scores to the matmul. This measures both
choices, on one CPU thread, at a search's sizes (rows = sources × beams, 4 heads, head_dim 16), with keys and
values read from a cache's buffer as the attention reads them (the filled part of ``(2, B, H, capacity,
head_dim)``, or positions first, ``(capacity, 2, B, H, head_dim)``):

* scores ``(B, H, 1, hd) @ keys.transpose(-2, -1)`` against ``(query * keys).sum(-1)``;
* weighted values ``(B, H, 1, Tk) @ values`` against ``(weights.transpose(-2, -1) * values).sum(-2)``.

Reported: microseconds, the best of interleaved rounds, and the matmul's time over the elementwise one's (above 1:
the elementwise form is faster). Writes ``benchmarks/results/single_query.md`` (``--out``: elsewhere).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from attnlab.bench.machine import machine_facts
from attnlab.files import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "single_query.md"
HEADS, HEAD_DIM, CAPACITY = 4, 16, 12


def cached(rows: int, keys: int, positions_first: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The filled part of a cache's keys and values, ``(B, H, Tk, hd)`` views of its buffer."""
    if positions_first:
        buffer = torch.randn(CAPACITY, 2, rows, HEADS, HEAD_DIM).permute(1, 2, 3, 0, 4)
    else:
        buffer = torch.randn(2, rows, HEADS, CAPACITY, HEAD_DIM)
    return buffer[0, :, :, :keys], buffer[1, :, :, :keys]


def best_us(ways: dict, rounds: int, calls: int) -> dict[str, float]:
    """Microseconds per call of each way, the best of ``rounds`` interleaved rounds of ``calls`` calls."""
    best = dict.fromkeys(ways, float("inf"))
    for way in ways.values():
        way()  # warm-up
    for _ in range(rounds):
        for name, way in ways.items():
            start = time.perf_counter()
            for _ in range(calls):
                way()
            best[name] = min(best[name], (time.perf_counter() - start) / calls * 1e6)
    return best


def measure(rows: int, keys: int, positions_first: bool, rounds: int) -> dict[str, float]:
    key, value = cached(rows, keys, positions_first)
    query = torch.randn(rows, HEADS, 1, HEAD_DIM)
    weights = torch.softmax(torch.randn(rows, HEADS, 1, keys), dim=-1)
    torch.testing.assert_close((query * key).sum(-1).unsqueeze(-2), query @ key.transpose(-2, -1))
    calls = max(5, 20_000 // rows)
    return best_us({
        "scores matmul": lambda: query @ key.transpose(-2, -1),
        "scores elementwise": lambda: (query * key).sum(-1).unsqueeze(-2),
        "values matmul": lambda: weights @ value,
        "values elementwise": lambda: (weights.transpose(-2, -1) * value).sum(-2, keepdim=True),
    }, rounds, calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two sizes, few rounds: a smoke test")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the table goes")
    args = parser.parse_args()
    torch.set_num_threads(1)  # a search's figures are measured on one thread (benchmarks/bench_versions.py)
    sizes = [(256, 6)] if args.quick else [(r, k) for r in (64, 256, 1024, 4000) for k in (1, 2, 6, 11)]
    rounds = 2 if args.quick else args.rounds
    lines = ["# One query against a few cached keys" + (" (--quick: a smoke test, not a measurement)"
                                                        if args.quick else ""),
             "", machine_facts().summary(), "",
             "Command: `" + " ".join(["benchmarks/bench_single_query.py", *sys.argv[1:]]) + "`. One thread; "
             f"{HEADS} heads of {HEAD_DIM}; µs per call, best of {rounds} interleaved rounds; \"matmul / "
             "elementwise\" above 1: the elementwise form is faster.", "",
             "| buffer | rows | keys | scores: matmul | elementwise | matmul / elementwise "
             "| values: matmul | elementwise | matmul / elementwise |",
             "|---|---|---|---|---|---|---|---|---|"]
    for positions_first in (False, True):
        for rows, keys in sizes:
            r = measure(rows, keys, positions_first, rounds)
            cells = [f"{r[f'{p} matmul']:.1f} | {r[f'{p} elementwise']:.1f} | "
                     f"{r[f'{p} matmul'] / r[f'{p} elementwise']:.2f}" for p in ("scores", "values")]
            buffer = "positions first" if positions_first else "rows first"
            lines.append(f"| {buffer} | {rows} | {keys} | {cells[0]} | {cells[1]} |")
            print(lines[-1], flush=True)
    atomic_write_text(args.out, "\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
