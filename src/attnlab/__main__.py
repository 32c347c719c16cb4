"""``python -m attnlab`` and the ``attnlab`` program: the command line, Ctrl-C answered from the first moment."""

from attnlab.interrupt import install_early


def run() -> None:
    """Install the early Ctrl-C handler, then import and run the command line (imports take a while)."""
    install_early()
    from attnlab.cli import main

    main(prog_name="attnlab")


if __name__ == "__main__":
    run()
