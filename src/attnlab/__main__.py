"""``python -m attnlab`` and the ``attnlab`` program: the command line, Ctrl-C answered from the first moment."""

import os

from attnlab.interrupt import install_early


def run() -> None:
    """Install the early Ctrl-C handler, then import and run the command line (imports take a while)."""
    install_early()
    # torch's CPU allocator backs large tensors with 2 MiB pages when asked (read once, before its first
    # allocation): weights then stream from memory without a page-table walk every 4 KiB, which on a virtual
    # machine raised the measured read bandwidth from ~19 to ~27 GB/s (docs/decoding.md)
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    from attnlab.cli import main

    main(prog_name="attnlab")


if __name__ == "__main__":
    run()
