"""``attnlab demo``: the walk-through, step by step, from the four mechanisms to a trained GPT, a translation model
and a report.

Each step is a function of one :class:`Demo` (where to print, the seed, where to write files); they run in
the order of :data:`STEPS`. The demo sits at the top of the package: it imports the library, and nothing in
the library imports it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from rich.console import Console

from attnlab.demo.around_attention import around_attention_step
from attnlab.demo.context import Demo, Step, one_thread
from attnlab.demo.dates import translation_step
from attnlab.demo.mechanisms import mechanisms_step
from attnlab.demo.report import report_step
from attnlab.demo.shakespeare import shakespeare_step
from attnlab.demo.toy import toy_step

# The report shows what the steps before it wrote (a trained model, if any), so it runs last.
STEPS: list[Step] = [mechanisms_step, around_attention_step, toy_step, shakespeare_step, translation_step,
                     report_step]


def run_demo(seed: int = 123, out_dir: str | Path = "out", console: Console | None = None,
             steps: list[Step] | None = None) -> None:
    """Run ``steps`` (every step of the demo by default), printing to ``console`` (stdout by default), on one
    thread (see :data:`attnlab.demo.context.THREADS`)."""
    demo = Demo(console or Console(), seed, Path(out_dir))
    with torch.no_grad(), one_thread():
        for step in STEPS if steps is None else steps:
            step(demo)


__all__ = ["STEPS", "Demo", "Step", "run_demo"]
