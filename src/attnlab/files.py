"""Files in and out: atomic writes (a reader sees the old file or the new one, never half of one), and reads
that refuse what is not a regular file.

Every file attnlab writes (checkpoints, token caches, figures, reports, benchmark results) goes through
:func:`atomic_write`; a path that is a symbolic link is written through to its target, as ``cp`` does, and the
link stays. Every file it reads from a user (corpora, pairs, configs, checkpoints, tokenizers) goes through
:func:`read_bytes`: a FIFO or a device would hang the reader or never end, so it is refused before a byte is
read. Torch-free, so the NumPy side and the benchmarks can use it too.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    ``write`` fails, the temporary file is removed and ``path`` is untouched. A symbolic link is followed to
    its target (created if it dangles), which is replaced; the link itself stays. Only a regular file is replaced:
    a directory, a FIFO or a device there (or at the link's end) is a :class:`WriteError`, before anything is
    written.
    """
    asked = path = Path(path)
    if path.is_symlink():  # write through the link, as cp does; replacing the link would cut it
        path = Path(os.path.realpath(path))
    try:
        mode = path.stat().st_mode
    except OSError:
        mode = None  # nothing there yet (or nothing that can be looked at: mkstemp below says why)
    if mode is not None and not stat.S_ISREG(mode):  # a FIFO or a device replaced by a file would be lost
        if path == asked:
            raise WriteError(tr("cannot write {path!r}: it {what}; only a regular file is replaced", path=str(asked),
                                what=not_regular(mode)))
        raise WriteError(tr("cannot write {path!r}: it links to {target!r}, which {what}; only a regular file is "
                            "replaced", path=str(asked), target=str(path), what=not_regular(mode)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}")
    except OSError as err:  # name the file asked for, not a temporary one
        raise WriteError(tr("cannot write {path!r}: {reason}", path=str(asked), reason=err.strerror or err)) from None
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise WriteError(tr("cannot write {path!r}: {reason}", path=str(asked), reason=err.strerror or err)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return asked


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


def read_bytes(path: str | Path, argument: str) -> bytes:
    """The bytes of the regular file ``path``; a ValueError names ``argument``, the path and what is wrong.

    The file is opened without blocking and checked before it is read: a FIFO would wait for a writer and a
    device such as ``/dev/zero`` never ends, so both are refused as "not a regular file", as are directories.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        raise ValueError(_cannot_read(argument, path, err)) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):  # before fdopen, which refuses a directory with only the descriptor's number
        os.close(fd)
        raise ValueError(tr("{argument}: {path!r} {what}; expected a file", argument=argument, path=str(path),
                            what=not_regular(mode)))
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read()
        except OSError as err:
            raise ValueError(_cannot_read(argument, path, err)) from None


def not_regular(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) that is not a regular file is, in a few words."""
    return tr("is a directory") if stat.S_ISDIR(mode) else tr("is not a regular file (a FIFO, a device or a socket)")


def _cannot_read(argument: str, path: Path, err: OSError) -> str:
    if isinstance(err, FileNotFoundError):
        return tr("{argument}: {path!r} is missing (no such file)", argument=argument, path=str(path))
    return tr("{argument}: cannot read {path!r}: {reason}", argument=argument, path=str(path),
              reason=err.strerror or err)


def read_text(path: str | Path, argument: str) -> str:
    """The UTF-8 text of the regular file ``path`` (see :func:`read_bytes`); bytes that are not UTF-8 are a
    ValueError naming ``argument``, the path, the byte and its offset."""
    data = read_bytes(path, argument)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(tr("{argument}: {path!r} is not UTF-8 text (byte 0x{byte:02x} at offset {start}); give a "
                            "UTF-8 text file", argument=argument, path=str(path), byte=data[err.start],
                            start=err.start)) from None


def read_json(path: str | Path, argument: str, expected: type = dict) -> Any:
    """The JSON value in the regular file ``path``, which must be a ``expected`` (an object: ``dict``); a file
    that is missing, truncated, not JSON or of another shape is a ValueError naming ``argument`` and the file."""
    text = read_text(path, argument)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(tr("{argument}: {path!r} is not valid JSON ({err}); the file is truncated or damaged",
                            argument=argument, path=str(path), err=err)) from None
    if not isinstance(value, expected):
        raise ValueError(tr("{argument}: {path!r} holds a JSON {found}, expected a JSON {expected}",
                            argument=argument, path=str(path), found=json_kind(value), expected=json_kind(expected())))
    return value


def json_kind(value: object) -> str:
    """What JSON calls the type of ``value``: object, array, string, number, boolean or null."""
    kinds = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return kinds.get(type(value), "number")


def json_field(data: dict[str, Any], key: str, expected: type, where: str) -> Any:
    """``data[key]``, which must be a ``expected`` (``bool`` is no ``int`` here); a missing key or another type
    is a ValueError naming ``where`` (the file it came from) and the key."""
    if key not in data:
        raise ValueError(tr("{where}: the field {key!r} is missing; the file is damaged", where=where, key=key))
    value = data[key]
    if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
        raise ValueError(tr("{where}: the field {key!r} is {value!r}, expected a JSON {kind}; the file is damaged",
                            where=where, key=key, value=value, kind=json_kind(expected())))
    return value
