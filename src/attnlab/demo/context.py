"""What every step of the demo is given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console


@dataclass
class Demo:
    """Where to print, the seed of every random choice, and where to write files."""

    console: Console = field(default_factory=Console)
    seed: int = 123
    out_dir: Path = Path("out")

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)


Step = Callable[[Demo], None]
