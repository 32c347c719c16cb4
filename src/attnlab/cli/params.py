"""Checks that every attnlab command applies to its arguments, whatever they are, and the shared types.

:func:`check_raw` runs on the words as typed, before click converts them; :func:`check_values` on the values after:

* an option given an empty value (``--out ""``) is refused: an empty path is the current directory to Python,
  and a run would write (or an ``--overwrite`` delete) there;
* a word that is not UTF-8 (the shell passes bytes; Python keeps the bad ones as lone surrogates, which every
  later encoding chokes on) is refused, except where it names a file (``click.Path``): file names may be any bytes;
* a float option that is NaN or infinite is refused (click's float type accepts both).

Each error is click's usage error for that parameter: one line naming it, the value and what was expected.
"""

from __future__ import annotations

import math
import re

import click

from attnlab.i18n import tr

#: ``--seed``: what torch's generators accept and every seed of attnlab fits, 64 bits
SEED = click.IntRange(0, 2**64 - 1)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _words(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [w for v in value for w in _words(v)]
    return []


def not_utf8(word: str) -> str | None:
    """Why ``word`` is not text (a byte that is not UTF-8, or a lone surrogate), or None if it is."""
    found = _SURROGATE.search(word)
    if found is None:
        return None
    code = ord(found.group())
    if 0xDC80 <= code <= 0xDCFF:  # how Python keeps an undecodable byte of argv (surrogateescape)
        return tr("byte 0x{byte:02x} at character {index}", byte=code - 0xDC00, index=found.start())
    return tr("a lone surrogate U+{code:04X} at character {index}", code=code, index=found.start())


def check_raw(command: click.Command, ctx: click.Context, args: list[str]) -> None:
    """Empty option values and words that are not UTF-8, before click converts anything (see the module)."""
    opts, _, _ = command.make_parser(ctx).parse_args(args=list(args))
    for param in command.get_params(ctx):
        words = _words(opts.get(param.name))
        if isinstance(param, click.Option) and not param.is_flag and "" in words:
            raise click.BadParameter(tr("expected a value, got an empty string"), ctx=ctx, param=param)
        if isinstance(param.type, click.Path):
            continue
        for word in words:
            reason = not_utf8(word)
            if reason is not None:
                raise click.BadParameter(tr("{value!r} is not UTF-8 text ({reason}); give UTF-8 text",
                                            value=word, reason=reason), ctx=ctx, param=param)


def check_values(command: click.Command, ctx: click.Context) -> None:
    """Float values that are NaN or infinite, after click has converted them."""
    for param in command.get_params(ctx):
        if not isinstance(param.type, click.types.FloatParamType):
            continue
        value = ctx.params.get(param.name)
        for number in value if isinstance(value, list | tuple) else [value]:
            if number is not None and not math.isfinite(number):
                raise click.BadParameter(tr("{value} is not a finite number", value=number), ctx=ctx, param=param)


def refuse_unused(ctx: click.Context, names: list[str], why: str) -> None:
    """Options among ``names`` given on the command line that do nothing here (``why``: "without --heatmap"): a
    usage error, so that ``--layer 3`` without ``--heatmap`` is not silently ignored."""
    for param in ctx.command.get_params(ctx):
        if param.name in names and ctx.get_parameter_source(param.name) is click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError(tr("{option} {value} does nothing {why}; leave it out", option=param.opts[-1],
                                      value=ctx.params.get(param.name), why=why), ctx=ctx)


def check_resume_or_overwrite(resume: bool, overwrite: bool) -> None:
    """``--resume`` continues the run in ``--out``, ``--overwrite`` deletes it: both at once is a usage error."""
    if resume and overwrite:
        raise click.UsageError(tr("--resume continues the run in --out and --overwrite deletes it; give one of them"))
