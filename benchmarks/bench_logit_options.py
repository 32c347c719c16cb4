"""What soft-capping (Gemma 2) and sinks (gpt-oss) cost in each attention backend on the CPU, as a ratio to the
same backend without them, timed in the same run.

    PYTHONPATH=src python benchmarks/bench_logit_options.py            # (1, 8, 1024, 64), causal; ~1 min
    PYTHONPATH=src python benchmarks/bench_logit_options.py --quick    # (1, 4, 256, 32): a smoke test, seconds

For each backend (``math``, ``chunked``; ``sdpa`` for sinks only: it cannot cap) the forward and forward + backward
of plain attention, with a cap of 50, and with sinks are called in turn, the order rotating each round; a figure is
the median time over the plain call's (1.00 = free). ``auto`` is timed too: with a cap it cannot run torch's kernel,
so its ratio is against ``auto`` without one. On a GPU the flash kernel's cost is what ``benchmarks/bench_gpu.py``
would add; it is not measured here.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from attnlab.functional import scaled_dot_product_attention

VARIANTS = {"plain": {}, "softcap 50": {"softcap": 50.0}, "sinks": {"sinks": True}}


def call(backend: str, shape: tuple[int, int, int, int], variant: dict, backward: bool) -> Callable[[], None]:
    b, h, t, d = shape
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, h, t, d, generator=g, requires_grad=backward) for _ in range(3))
    sinks = torch.zeros(h, requires_grad=backward) if variant.get("sinks") else None
    kw = {"softcap": variant.get("softcap"), "sinks": sinks}

    def run() -> None:
        out = scaled_dot_product_attention(q, k, v, is_causal=True, backend=backend, **kw)
        if backward:
            out.sum().backward()
    return run


def median_ms(fns: dict[str, Callable[[], None]], rounds: int) -> dict[str, float]:
    """Median milliseconds of each function, called in turn, the order rotating each round, after one warm-up."""
    for fn in fns.values():
        fn()
    names, times = list(fns), {name: [] for name in fns}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            start = time.perf_counter()
            fns[name]()
            times[name].append(1000 * (time.perf_counter() - start))
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, few rounds: a smoke test")
    args = parser.parse_args(argv)
    shape, rounds = ((1, 4, 256, 32), 5) if args.quick else ((1, 8, 1024, 64), 15)
    torch.manual_seed(0)
    lines = [f"shape (B, H, T, D) = {shape}, causal, float32, {torch.get_num_threads()} thread(s); time over the "
             "same backend without the option", "", "| backend | pass | plain (ms) | softcap 50 | sinks |",
             "|---|---|---|---|---|"]
    for backend in ("math", "chunked", "sdpa", "auto"):
        for backward in (False, True):
            fns = {name: call(backend, shape, variant, backward) for name, variant in VARIANTS.items()
                   if not (backend == "sdpa" and "softcap" in variant)}
            ms = median_ms(fns, rounds)
            cells = [f"{ms[name] / ms['plain']:.2f}×" if name in ms else "cannot"
                     for name in VARIANTS if name != "plain"]
            lines.append(f"| {backend} | {'fwd + bwd' if backward else 'forward'} | {ms['plain']:.1f} | "
                         + " | ".join(cells) + " |")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
