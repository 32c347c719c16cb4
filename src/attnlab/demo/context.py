"""What every step of the demo is given, and the one thread it runs on."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from rich.console import Console

#: The demo runs on one thread, for two reasons. The same numbers everywhere: a matrix product's sums are split
#: among the threads, so one and two threads train (slightly) different weights, and a fixed count trains the
#: same ones on any machine. And the same time with another program running: one thread keeps to its own core,
#: where two would wait for each other at every operation whenever the other core is busy (ten times slower, measured
#: on a shared 2-core machine).
THREADS = 1


@contextlib.contextmanager
def one_thread(threads: int = THREADS) -> Iterator[None]:
    """Run torch on ``threads`` threads, then restore the count it had."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass
class Demo:
    """Where to print, the seed of every random choice, and where to write files."""

    console: Console = field(default_factory=Console)
    seed: int = 123
    out_dir: Path = Path("out")

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)


Step = Callable[[Demo], None]
