"""The layouts of ``--parallel`` side by side: tokens/s and each process' peak memory, in one run, on one machine.

    torchrun --nproc_per_node=1 benchmarks/bench_parallel.py                       # one GPU: sharding's overhead
    torchrun --nproc_per_node=8 benchmarks/bench_parallel.py --modes ddp,fsdp,fsdp+tp --tp-size 2
    torchrun --nproc_per_node=2 benchmarks/bench_parallel.py --quick               # a smoke test on the CPU

Each mode trains the same model (default: ``gpt2-small`` in bf16 on a CUDA device, ``tiny`` in fp32 with
``--quick``) on the same characters, for ``--warmup`` steps that are not timed (allocations, the first
collectives) and then ``--steps`` timed ones; tokens/s is the trainer's own (the steps' time only, not the
checkpoints'). Peak memory is ``torch.cuda.max_memory_allocated`` on CUDA (nothing on the CPU). The first process
prints a Markdown table; ratios are against the first mode, timed in the same run. The trainer trains the model's
fast twins where the layout keeps whole modules (``ddp``; ``attnlab.fast.swap_modules``), the modules as built where
it shards them; ``--plain`` trains the book's modules everywhere (``attnlab train --plain``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist

from attnlab.files import atomic_write_text
from attnlab.training import TrainConfig
from attnlab.training.distributed import teardown_distributed
from attnlab.training.trainer import Trainer

TEXT = "".join(f"{i} ROMEO: But, soft! what light through yonder window breaks?\n" for i in range(4000))


def measure(mode: str, args: argparse.Namespace, root: Path, corpus: Path) -> tuple[float, float]:
    """``(tokens/s, peak bytes)`` of ``args.steps`` timed steps of ``mode``."""
    cuda = torch.cuda.is_available()
    config = TrainConfig(data=str(corpus), out=str(root / mode.replace("+", "-")), preset=args.preset,
                         dtype=args.dtype, parallel=mode, tp_size=args.tp_size if "tp" in mode else None,
                         max_iters=args.warmup + args.steps, eval_interval=10**6, eval_iters=1,
                         batch_size=args.batch_size, grad_accum=args.grad_accum, seed=0,
                         activation_checkpointing=args.activation_checkpointing, accelerate=not args.plain)
    trainer = Trainer(config, quiet=True, overwrite=True)
    trainer.train(stop_at=args.warmup)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    result = trainer.train()
    return result.tokens_per_s, torch.cuda.max_memory_allocated() if cuda else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="ddp,fsdp")
    parser.add_argument("--tp-size", type=int, default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--grad-accum", type=int, default=None)
    parser.add_argument("--activation-checkpointing", action="store_true")
    parser.add_argument("--plain", action="store_true", help="train the book's modules, not their fast twins")
    parser.add_argument("--out", default="out/bench-parallel", help="the runs' checkpoints (replaced each time)")
    args = parser.parse_args()
    cuda = torch.cuda.is_available() and not args.quick
    args.preset = "gpt2-small" if cuda else "tiny"
    args.dtype = "bf16" if cuda else "fp32"
    args.steps = args.steps or (50 if cuda else 10)
    args.batch_size = args.batch_size or (8 if cuda else 4)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    args.grad_accum = args.grad_accum or world
    root = Path(args.out)
    corpus = atomic_write_text(root / "corpus.txt", TEXT)  # every process writes the same, whole
    rows = [(mode, *measure(mode, args, root, corpus)) for mode in args.modes.split(",")]
    if not dist.is_initialized() or dist.get_rank() == 0:
        device = torch.cuda.get_device_name() if cuda else "CPU"
        print(f"{args.preset}, {args.dtype}, {world} process(es) on {device}; batch {args.batch_size} × "
              f"grad_accum {args.grad_accum}, {args.steps} timed steps; "
              f"{'plain modules' if args.plain else 'fast twins where a layout keeps whole modules'}\n")
        print("| --parallel | tokens/s | vs first | peak memory per process |")
        print("|---|---|---|---|")
        for mode, tps, peak in rows:
            shown = f"{peak / 2**30:.2f} GiB" if peak == peak else "–"  # NaN: no CUDA allocator to ask
            print(f"| {mode} | {tps:,.0f} | {tps / rows[0][1]:.2f}× | {shown} |")
    teardown_distributed()


if __name__ == "__main__":
    main()
