"""Ctrl-C during training: the run stops cleanly after the current step (a checkpoint written) instead of dying."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def stop_signals(loop: Any) -> Iterator[None]:
    """While inside, Ctrl-C (or SIGTERM) sets ``loop._stop_requested``, which the loop reads after each step; a
    second Ctrl-C aborts. Only the main thread can take signals: elsewhere nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if loop._stop_requested:
            raise KeyboardInterrupt
        loop._stop_requested = True

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
