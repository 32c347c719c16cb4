"""Figure files: PNG or SVG by the file name, written atomically."""

from __future__ import annotations

from pathlib import Path

from attnlab.files import atomic_write
from attnlab.i18n import tr


def image_format(path: str | Path) -> str:
    """``"png"`` or ``"svg"`` from the file name; anything else is a ValueError."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in ("png", "svg"):
        raise ValueError(tr("output file must end in .png or .svg, got {path!r}", path=str(path)))
    return suffix


def save_figure(fig, path: str | Path, dpi: int = 120) -> Path:
    """Save a matplotlib figure as PNG or SVG (chosen by the suffix), atomically."""
    fmt = image_format(path)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight"))
