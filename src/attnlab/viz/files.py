"""Writing figure files atomically: a temp file beside the target, then ``os.replace``."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)``, then move the temp file onto ``path`` (never a half-written file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a figure is as readable as any new file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def image_format(path: str | Path) -> str:
    """``"png"`` or ``"svg"`` from the file name; anything else is a ValueError."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in ("png", "svg"):
        raise ValueError(f"output file must end in .png or .svg, got {str(path)!r}")
    return suffix


def save_figure(fig, path: str | Path, dpi: int = 120) -> Path:
    """Save a matplotlib figure as PNG or SVG (chosen by the suffix), atomically."""
    fmt = image_format(path)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight"))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
