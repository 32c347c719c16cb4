"""What the command-line tests that train a tiny GPT share: a small corpus, the tiny model's flags, and a runner."""

from click.testing import CliRunner

from attnlab.cli import main

TEXT = "ROMEO:\nBut, soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n\n" * 12
TINY = ["--preset", "tiny", "--context-length", "16", "--batch-size", "4", "--eval-interval", "5", "--eval-iters", "2",
        "--warmup-iters", "2", "-q"]


def run(*args):
    """``attnlab ARGS...`` in process; exceptions propagate, so a test sees a traceback rather than exit 1."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
