"""Ctrl-C while the command line is still starting: exit 130 with one line, never a traceback from an import.

Python turns Ctrl-C into a KeyboardInterrupt wherever the program is; before a command runs that is inside some
import (click, torch, ...), where no handler of attnlab's can catch it: the reader would get a traceback, or
worse, an interrupt that an import machinery swallows. So the ``attnlab`` program (:mod:`attnlab.__main__`)
installs :func:`exit_interrupted` first thing, and the command puts Python's own handler back
(:func:`restore_default`) as it starts, from when Ctrl-C is a KeyboardInterrupt that it cleans up after.
It runs before almost anything is loaded, so it imports next to nothing: ``_signal`` is the C module behind
``signal``, which itself would first import ``enum`` and ``functools`` (tens of milliseconds, all of them a window
where Ctrl-C would end in a traceback), and ``posix`` is the core of ``os``.
"""

import _signal
import sys

if sys.platform == "win32":  # os's C core: the handler may run while os itself is being imported
    import nt as _os
else:
    import posix as _os


def exit_interrupted(signum: int, frame: object) -> None:
    """Say "Interrupted." (in the reader's language when the catalog can be read) and exit 130 at once."""
    try:
        from attnlab.i18n import tr

        message = tr("Interrupted.")
    except Exception:  # interrupted while the catalog itself was being imported
        message = "Interrupted."
    _os.write(2, (message + "\n").encode("utf-8", "replace"))
    _os._exit(130)  # nothing is written yet: there is nothing to clean up


def install_early() -> None:
    """Ctrl-C exits 130 from now on, until :func:`restore_default`."""
    _signal.signal(_signal.SIGINT, exit_interrupted)


def restore_default() -> None:
    """Ctrl-C raises KeyboardInterrupt again, if :func:`install_early` had changed that (and only then)."""
    if _signal.getsignal(_signal.SIGINT) is exit_interrupted:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
