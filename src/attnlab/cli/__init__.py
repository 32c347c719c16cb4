"""The ``attnlab`` command line. Subcommands live one per module and are imported only when run,
so ``attnlab --help`` answers at once, without importing torch."""

from __future__ import annotations

import importlib

import click

from attnlab import __version__

# name -> (module under attnlab.cli, one-line help). Each module defines a click command named ``command``.
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("bench", "Measure every attention backend: time, GFLOP/s vs the machine's limit, memory."),
    "demo": ("demo", "Walk through attention step by step, end to end."),
    "explain": ("explain", "Show the arithmetic of attention for one token, step by step."),
    "heatmap": ("heatmap", "Draw attention weights as a heatmap (PNG or SVG), CJK text included."),
    "pe-plot": ("pe_plot", "Plot the sinusoidal positional encoding."),
    "view": ("view", "Write an interactive, self-contained HTML viewer of attention."),
    "train": ("train", "Train a GPT on a text corpus (resumable; distributed under torchrun)."),
    "sample": ("sample", "Generate text from a trained checkpoint, streamed as it comes."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(f"attnlab.cli.{COMMANDS[cmd_name][0]}")
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="attnlab")
def main() -> None:
    """attnlab: attention, the mechanism at the heart of every Transformer.

    Every number can be seen; every fast path is proven equal to the readable one.
    """
