"""``python -m attnlab``: the same command line as ``attnlab``."""

from attnlab.cli import main

if __name__ == "__main__":
    main(prog_name="attnlab")
