"""The training progress bar: the step of the planned steps, the loss, the learning rate, tokens/s, the time spent
and the time left."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from attnlab.i18n import _


def progress_bar(console: Console, show: bool, clock: Callable[[], float]) -> Progress:
    """A rich progress bar whose task has the fields ``of`` (the planned steps, as text: ``"?"`` until a time
    budget has made its plan), ``loss``, ``lr`` and ``tps``. ``clock`` drives its times, so that its time left is the
    one the trainer's clock (a fake one, in tests) gives."""
    columns = [TextColumn(_("[bold]step {task.completed}/{task.fields[of]}")), BarColumn(),
               TextColumn(_("loss {task.fields[loss]:.4f}  lr {task.fields[lr]:.2e}  {task.fields[tps]:,.0f} tok/s")),
               TimeElapsedColumn(), TimeRemainingColumn()]
    return Progress(*columns, console=console, disable=not show, get_time=clock)
