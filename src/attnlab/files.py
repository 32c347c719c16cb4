"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every file attnlab writes (checkpoints, token caches, figures, reports, benchmark results) goes
through here. Torch-free, so the NumPy side and the benchmarks can use it too.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from attnlab.i18n import tr


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class WriteError(OSError):
    """A file could not be written; the message names the file asked for and why."""


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it over ``path``; return ``path``.

    The temporary file lives in the same directory (created if missing) and keeps ``path``'s suffix,
    so ``os.replace`` is an atomic rename and writers that look at the suffix still work. If
    ``write`` fails, the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}")
    except OSError as err:  # name the file asked for, not a temporary one
        raise WriteError(tr("cannot write {path!r}: {reason}", path=str(path), reason=err.strerror or err)) from None
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise WriteError(tr("cannot write {path!r}: {reason}", path=str(path), reason=err.strerror or err)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def check_writable_dir(path: str | Path, argument: str) -> None:
    """Create the directory ``path`` and prove a file can be written there, before any work is done.

    A ValueError names ``argument`` (the option that gave the path), the path and the reason.
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise ValueError(tr("{argument}: cannot write to the output directory {path!r}: {reason}", argument=argument,
                            path=str(path), reason=err.strerror or err)) from None
