"""Sizes that cannot fit: refused before anything is allocated, with the bytes they would need.

A size typed by mistake (``--batch-size 1000000000``, ``--d-model 1000000``) would otherwise fail deep inside
the allocator, or worse, be granted lazily by the kernel and end with the machine swapping or the process
killed. The callers estimate a *lower bound* of what a command needs (the parameters and their optimizer state,
one batch's logits, a table) and :func:`check_fits` compares it with the machine's memory: what is refused
could never run here; what passes may still need more. Torch-free: the device's memory is passed in for a GPU.
"""

from __future__ import annotations

import os

from attnlab.i18n import tr


def machine_memory() -> int | None:
    """The machine's physical memory in bytes (None where the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``; binary units, three significant figures."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_fits(nbytes: int, what: str, arguments: str, available: int | None = None, where: str = "") -> None:
    """Raise a ValueError if ``nbytes`` (a lower bound of what ``what`` needs) exceeds ``available`` bytes (default:
    this machine's memory). The message names ``what``, the bytes, and ``arguments``: the options that set the size.
    """
    available = machine_memory() if available is None else available
    if available is None or nbytes <= available:
        return
    raise ValueError(tr("{arguments}: {what} would need at least {need} ({nbytes:,} bytes), more than the "
                        "{available} of {where}; choose smaller sizes", arguments=arguments, what=what,
                        need=format_bytes(nbytes), nbytes=nbytes, available=format_bytes(available),
                        where=where or tr("this machine's memory")))
