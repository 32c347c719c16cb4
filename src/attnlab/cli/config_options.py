"""Command-line options that set a field of a config dataclass: the default ``--help`` shows is the field's own,
read from the dataclass, so it is never typed a second time and never goes stale.

The option itself defaults to None, "not given", so that a TOML file or a resumed checkpoint's config may set the
field; only flags the user gives override it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import click
from click.types import OptionHelpExtra

from attnlab.i18n import N_, _

SWITCH = {True: N_("on"), False: N_("off")}  # how a bool field's default reads in --help


def field_default(config: type, name: str) -> str | None:
    """How ``--help`` shows the default of field ``name`` of the dataclass ``config`` (None: nothing to show, for a
    field that is not there or defaults to None)."""
    field = next((f for f in dataclasses.fields(config) if f.name == name), None)
    if field is None or field.default in (None, dataclasses.MISSING):
        return None
    return _(SWITCH[field.default]) if isinstance(field.default, bool) else str(field.default)


class FieldOption(click.Option):
    """``click.option(..., cls=FieldOption, config=TrainConfig)``: help ends in ``[default: …]``, the value of the
    config field of the option's name; ``values``, if given, fills the help's ``{placeholders}`` when it is shown
    (a list read from its one source, such as the presets of the registry)."""

    def __init__(self, *args: Any, config: type | None = None, values: Callable[[], dict[str, str]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config, self.values = config, values

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        text = self.help
        if self.values is None or text is None:
            return super().get_help_record(ctx)
        try:  # the help is the reader's language by now (lang.Translated): fill it in
            self.help = text.format(**self.values())
            return super().get_help_record(ctx)
        finally:
            self.help = text

    def get_help_extra(self, ctx: click.Context) -> OptionHelpExtra:
        extra = super().get_help_extra(ctx)
        shown = None if self.config is None else field_default(self.config, self.name)
        if shown is not None:
            extra["default"] = shown
        return extra
