"""The types a configuration dataclass declares, checked on values that come from outside (a TOML file, a
checkpoint's JSON): a wrong type is named with its key, its value and the type expected, before anything is built.

Without it a string where a number belongs fails deep inside (``'>' not supported between 'str' and 'int'``), and
a string where a flag belongs (``bias = "no"``) is quietly true. Torch-free, like the other root modules.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from attnlab.i18n import N_, _, tr

#: a declared type -> (does a value fit it, how to say what is expected)
_CHECKS: dict[type, tuple[typing.Callable[[Any], bool], str]] = {
    bool: (lambda v: isinstance(v, bool), N_("true or false")),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), N_("an integer")),
    float: (lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
            N_("a finite number")),
    str: (lambda v: isinstance(v, str), N_("a string")),
    dict: (lambda v: isinstance(v, dict), N_("a table")),
    list: (lambda v: isinstance(v, list | tuple), N_("a list")),
    tuple: (lambda v: isinstance(v, list | tuple), N_("a list")),
}


def _alternatives(hint: Any) -> tuple[list[Any], bool]:
    """``int | None`` -> ``([int], True)``; ``dict[str, Any]`` -> ``([dict], False)``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        return [a for a in args if a is not type(None)], type(None) in args
    return [typing.get_origin(hint) or hint], False


def check_field_types(cls: type, values: Mapping[str, Any], source: str) -> None:
    """Raise a ValueError for the first value of ``values`` whose type is not the one ``cls`` declares.

    Keys that ``cls`` does not declare are left alone (reporting them, with a hint, is the caller's part), and so
    are declared types other than bool, int, float (finite: NaN and infinity are refused), str, dict and list.
    """
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        if key not in hints or typing.get_origin(hints[key]) is typing.ClassVar:
            continue
        kinds, optional = _alternatives(hints[key])
        if (value is None and optional) or any(k not in _CHECKS for k in kinds):
            continue
        if not any(_CHECKS[k][0](value) for k in kinds):
            expected = " " + _("or") + " "
            expected = expected.join(_(_CHECKS[k][1]) for k in kinds)
            raise ValueError(tr("{source}: {key} = {value!r} ({found}); expected {expected}", source=source, key=key,
                                value=value, found=type(value).__name__, expected=expected))
