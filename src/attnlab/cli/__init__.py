"""The ``attnlab`` command line. Subcommands live one per module and are imported only when run, so
``attnlab --help`` imports none of them (nor matplotlib, nor the models)."""

from __future__ import annotations

import importlib
import os
import re

import click

from attnlab import __version__
from attnlab.cli.lang import Translated
from attnlab.i18n import N_, _, set_language, tr

# name -> (module under attnlab.cli, one-line help). Each module defines a click command named ``command``.
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("bench", N_("Measure every attention backend: time, GFLOP/s vs the machine's limit, memory.")),
    "cache-size": ("cache_size", N_("How big the cache is for real models' configs: per token, at a length, "
                                    "plotted.")),
    "demo": ("demo", N_("Walk through attention step by step, end to end.")),
    "explain": ("explain", N_("Show the arithmetic of attention for one token, step by step.")),
    "explore": ("explore", N_("Explore attention live in the browser: a local server and its page, offline.")),
    "export": ("export", N_("Write any checkpoint (sharded ones too) as one safetensors file.")),
    "heads": ("heads", N_("What the heads learn and which cause an output: induction heads, BERT's head roles, "
                          "rollout and flow, pruning, patching.")),
    "heatmap": ("heatmap", N_("Draw attention weights as a heatmap (PNG or SVG), CJK text included.")),
    "kernels": ("kernels", N_("Build attnlab's CPU kernels ahead of time (about a minute, once), or say their state.")),
    "pe-plot": ("pe_plot", N_("Plot the sinusoidal positional encoding.")),
    "view": ("view", N_("Write an interactive, self-contained HTML viewer of attention.")),
    "train": ("train", N_("Train a GPT on a text corpus (resumable; distributed under torchrun).")),
    "sample": ("sample", N_("Generate text from a trained checkpoint, streamed as it comes.")),
    "train-seq2seq": ("train_seq2seq",
                      N_("Train an encoder-decoder Transformer to translate (dates, numbers, a TSV).")),
    "translate": ("translate", N_("Translate with a train-seq2seq checkpoint (greedy or beam search), one line each.")),
}


_ALLOCATION_FAILED = re.compile(r"can't allocate memory|out of memory|OutOfMemory", re.IGNORECASE)
_TRIED = re.compile(r"tried to allocate (\d+(?:\.\d+)?) ?(bytes|[KMGT]iB)")


def out_of_memory(err: BaseException) -> str:
    """One line for an allocation that failed, with the size asked for when the allocator said it."""
    tried = _TRIED.search(str(err))
    size = f"{tried.group(1)} {tried.group(2)}" if tried else tr("more than there was")
    return tr("not enough memory: the command tried to allocate {size} at once; choose smaller sizes (batch, "
              "model, sequence length, beam)", size=size)


class OneLineUsageError(click.ClickException):
    """A usage error shown as one line (``Error: …``), with a usage error's exit status."""

    exit_code = 2


class LazyGroup(Translated, click.Group):
    """A click group whose subcommands are imported on first use; help and messages in the reader's language."""

    def main(self, *args, **kwargs):
        """Run once, in the language this run asks for (``--lang``, else the environment); forget it after."""
        set_language(None)
        try:
            return super().main(*args, **kwargs)
        finally:
            set_language(None)

    def make_context(self, info_name, args, parent=None, **extra):
        """The group's own options (``--lang``, ``--version``) parsed as every command's are: a mistake is one line."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a bare ``attnlab``: click shows the help
        except click.UsageError as err:
            raise OneLineUsageError(tr("{problem} (see {command})", problem=err.format_message(),
                                       command="attnlab --help")) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(f"attnlab.cli.{COMMANDS[cmd_name][0]}")
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section(_("Commands")):
            formatter.write_dl([(name, _(COMMANDS[name][1])) for name in self.list_commands(ctx)])

    def invoke(self, ctx: click.Context):
        """Run the command; whatever escapes it becomes one line on stderr and an exit code, never a traceback.

        Bad input (ValueError, TypeError, OSError, ImportError) exits 1 with its message; Ctrl-C exits 130; a closed
        pipe exits quietly; memory that could not be had is said in one line (sizes too large for this machine are
        refused before allocating where they can be foreseen; this is the net under the rest); anything else is a
        bug, reported in one line (``ATTNLAB_DEBUG=1`` shows the traceback).
        """
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a group with no subcommand (``attnlab heads``): click shows its help, as for ``attnlab``
        except click.UsageError as err:  # one line: what was wrong, and where to read more
            command = f"attnlab {ctx.invoked_subcommand} --help" if ctx.invoked_subcommand else "attnlab --help"
            raise OneLineUsageError(tr("{problem} (see {command})", problem=err.format_message(),
                                       command=command)) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise  # a closed pipe (``attnlab … | head``): click exits quietly, as Unix tools do
        except KeyboardInterrupt:
            click.echo(tr("Interrupted."), err=True)
            raise click.exceptions.Exit(130) from None
        except (ValueError, TypeError, OSError, ImportError) as err:
            raise click.ClickException(str(err)) from None
        except Exception as err:
            if os.environ.get("ATTNLAB_DEBUG"):
                raise
            if isinstance(err, MemoryError) or _ALLOCATION_FAILED.search(str(err)):
                raise click.ClickException(out_of_memory(err)) from None
            raise click.ClickException(tr("internal error ({err_type}: {err}); rerun with ATTNLAB_DEBUG=1 for the "
                                          "details, and please report it", err_type=type(err).__name__,
                                          err=err)) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             help=N_("attnlab: attention, the mechanism at the heart of every Transformer.\n\n"
                     "Every number can be seen; every fast path is proven equal to the readable one."))
@click.version_option(__version__, prog_name="attnlab")
def main() -> None:
    """The ``attnlab`` command (its help text is the group's ``help``, translated when shown)."""
