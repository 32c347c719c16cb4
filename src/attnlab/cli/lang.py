"""The command line in the reader's language: ``--lang``, help texts translated when shown, and click's own words.

* ``--lang en|zh`` is accepted by the main group (``attnlab --lang zh demo``) and by every subcommand
  (``attnlab demo --lang zh``). It is read before anything else is parsed, so even a usage error about the other
  arguments comes out in the language asked for.
* Help texts are declared in English with ``N_`` (so the catalog holds them) and translated by :class:`Command`
  when the help is formatted, after ``--lang`` has been read; the English originals stay on the objects.
* click words its own messages (``Usage:``, ``Show this message and exit.``, ``Error: …``) through the standard
  library's ``gettext`` functions, imported into each of its modules. :func:`install_click_translations` points
  those names at attnlab's catalog, which holds the few click messages a reader of attnlab can meet
  (:data:`CLICK_MESSAGES`); any other click message stays in English.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Sequence
from typing import Any

import click

from attnlab.cli.help_format import CellContext
from attnlab.cli.params import check_raw, check_values
from attnlab.i18n import LANGUAGES, N_, _, set_language
from attnlab.interrupt import restore_default

LANG_HELP = N_("Language of the output: en or zh [default: $ATTNLAB_LANG, else the locale, else en].")
HELP_OPTION = N_("Show this message and exit.")
#: the help options whose help is already the English key (click words a new one in the current language)
_ENGLISH_HELP: weakref.WeakSet[click.Option] = weakref.WeakSet()

# click's messages that attnlab's commands can show, marked here so that they are extracted into the catalog
CLICK_MESSAGES = (
    N_("Usage:"), N_("Options"), N_("Commands"), N_("Show the version and exit."), N_("Error: {message}"),
    N_("Aborted!"), N_("Missing command."), N_("default: {default}"), N_("required"), N_("env var: {var}"),
    N_("Invalid value: {message}"), N_("Invalid value for {param_hint}: {message}"),
    N_("Missing argument"), N_("Missing option"), N_("Missing parameter"), N_("Missing {param_type}"),
    N_("Missing parameter: {param_name}"), N_("No such option {name!r}."), N_("No such command {name!r}."),
    N_("Did you mean {possibility}?"), N_("(Did you mean one of: {possibilities}?)"),
    N_("Got unexpected extra argument ({args})"), N_("Got unexpected extra arguments ({args})"),
    N_("Option {name!r} requires an argument."), N_("Option {name!r} requires {nargs} arguments."),
    N_("Option {name!r} does not take a value."), N_("Argument {name!r} takes {nargs} values."),
    N_("{value!r} is not {choice}."), N_("{value!r} is not one of {choices}."),
    N_("{value!r} is not a valid {number_type}."), N_("{value} is not in the range {range}."),
    N_("{value!r} is not a valid boolean. Recognized values: {states}"),
    N_("file"), N_("directory"), N_("path"),
    N_("{name} {filename!r} does not exist."), N_("{name} {filename!r} is a file."),
    N_("{name} {filename!r} is a directory."), N_("{name} {filename!r} is not readable."),
    N_("{name} {filename!r} is not writable."),
)
# the names of click's number types, which its messages quote ("'abc' is not a valid integer")
CLICK_TYPE_NAMES = (N_("integer"), N_("integer range"), N_("float"), N_("float range"))
CLICK_MODULES = ("core", "decorators", "exceptions", "formatting", "parser", "termui", "types", "utils")


def _click_gettext(message: str) -> str:
    return _(message)


def _click_ngettext(singular: str, plural: str, n: int) -> str:
    return _(singular if n == 1 else plural)


def _names_translated(cls: type[click.ParamType]) -> None:
    """``cls.convert`` with the type's name (``file``, ``integer``: words click puts into its messages, named once
    when the type is made, before ``--lang`` is read) in the reader's language while it converts; help keeps
    click's metavars (``FILE``, ``INTEGER``) as they are."""
    convert = cls.convert
    if getattr(convert, "translates_name", False):
        return

    def translated(self: click.ParamType, value: Any, param: click.Parameter | None,
                   ctx: click.Context | None) -> Any:
        english = self.name
        self.name = _(english)
        try:
            return convert(self, value, param, ctx)
        finally:
            self.name = english

    translated.translates_name = True  # type: ignore[attr-defined]  # a mark on the function, read above
    cls.convert = translated  # type: ignore[method-assign]  # for every instance, made before --lang is read


def install_click_translations() -> None:
    """Let click's own messages follow attnlab's language (English stays click's text, word for word)."""
    for name in CLICK_MODULES:
        module = importlib.import_module(f"click.{name}")
        names = vars(module)  # each module's own imported names, replaced where it has them
        if "_" in names:
            names["_"] = _click_gettext
        if "ngettext" in names:
            names["ngettext"] = _click_ngettext
    for cls in (click.types.Path, click.types.IntParamType, click.types.FloatParamType):
        _names_translated(cls)


def lang_from_args(args: Sequence[str]) -> str | None:
    """The value of ``--lang X`` or ``--lang=X`` in ``args`` (before a ``--``), or None."""
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--lang" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--lang="):
            return arg.partition("=")[2]
    return None


def _set_lang(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        set_language(value)


def lang_option() -> click.Option:
    return click.Option(["--lang"], type=click.Choice(LANGUAGES), callback=_set_lang, expose_value=False,
                        is_eager=True, help=LANG_HELP)


class Translated(click.Command):
    """Help shown in the reader's language, laid out in terminal cells; ``--lang`` read first. Mixed into every
    attnlab command."""

    context_class = CellContext

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(lang_option())

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Read ``--lang`` first; check every argument as typed and as converted (:mod:`attnlab.cli.params`)."""
        lang = lang_from_args(args)
        if lang in LANGUAGES:  # a wrong value is reported by the option itself
            set_language(lang)
        check_raw(self, ctx, args)
        rest = super().parse_args(ctx, args)
        check_values(self, ctx)
        return rest

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        option = super().get_help_option(ctx)
        if option is not None and option not in _ENGLISH_HELP:
            # click words it in the current language when it makes it; keep the English key, translate when shown
            option.help = HELP_OPTION
            _ENGLISH_HELP.add(option)
        return option

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Format with every help text translated, then put the English ones back."""
        english = [(obj, obj.help) for obj in (self, *self.get_params(ctx))
                   if isinstance(obj, click.Command | click.Option) and obj.help]
        epilog = self.epilog
        try:
            for obj, text in english:
                obj.help = _(text)
            if epilog:  # line by line: examples stay as written, their headings are translated
                self.epilog = "\n".join(_(line) for line in epilog.split("\n"))
            super().format_help(ctx, formatter)
        finally:
            for obj, text in english:
                obj.help = text
            self.epilog = epilog


class Command(Translated):
    """An attnlab subcommand."""

    def invoke(self, ctx: click.Context):
        restore_default()  # from here on Ctrl-C is a KeyboardInterrupt, which the command cleans up after
        return super().invoke(ctx)


install_click_translations()
