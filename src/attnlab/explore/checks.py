"""What the explorer's API checks at its door: the body, every field by name, the limits.

A request that cannot be answered is an :class:`ApiError`: its HTTP status and one line saying which field, what
it got and what it expects, in the language the request asks for. The page shows that line; the server stays up.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal, overload

from attnlab.files import json_kind
from attnlab.i18n import tr

#: the longest text (or translation source or target) a request may carry, in characters (docs/explore.md)
MAX_TEXT = 100_000
#: the largest request body, in bytes: a text of MAX_TEXT characters, each escaped as \uXXXX, with room to spare
MAX_BODY = 8 * MAX_TEXT + 65_536


class ApiError(Exception):
    """A request refused: ``status`` (400 a field, 404 an unknown model, 413 too long) and its one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def parse_body(body: bytes | str | dict) -> dict[str, Any]:
    """The request's JSON object (a dict as it is: the notebook widget hands one over)."""
    if isinstance(body, dict):
        return body
    if len(body) > MAX_BODY:
        raise ApiError(413, tr("the request has {n:,} bytes; the explorer reads at most {limit:,}", n=len(body),
                               limit=MAX_BODY))
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise ApiError(400, tr("the request is not valid JSON: {err}", err=err)) from None
    if not isinstance(data, dict):
        raise ApiError(400, tr("the request must be a JSON object, got a JSON {kind}", kind=json_kind(data)))
    return data


def known_fields(data: dict[str, Any], known: tuple[str, ...]) -> None:
    """Refuse a field the endpoint does not read: a misspelt option would otherwise be ignored."""
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ApiError(400, tr("unknown field {field!r}; the fields are: {known}", field=unknown[0],
                               known=", ".join(known)))


@overload
def text_field(data: dict[str, Any], name: str = "text", required: Literal[True] = True) -> str: ...
@overload
def text_field(data: dict[str, Any], name: str, required: bool) -> str | None: ...
def text_field(data: dict[str, Any], name: str = "text", required: bool = True) -> str | None:
    """A text: a string, not empty (unless optional), at most :data:`MAX_TEXT` characters."""
    value = data.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ApiError(400, tr("{name}: expected a string, got {value!r}", name=name, value=shortened(value)))
    if required and not value.strip():
        raise ApiError(400, tr("{name} is empty: type some text", name=name))
    if len(value) > MAX_TEXT:
        raise ApiError(413, tr("{name} has {n:,} characters; the explorer reads at most {limit:,}", name=name,
                               n=len(value), limit=MAX_TEXT))
    return value


@overload
def int_field(data: dict[str, Any], name: str, low: int, high: int, default: int) -> int: ...
@overload
def int_field(data: dict[str, Any], name: str, low: int, high: int, default: None) -> int | None: ...
def int_field(data: dict[str, Any], name: str, low: int, high: int, default: int | None) -> int | None:
    """An integer in ``[low, high]``, or ``default`` (None: the field may be null)."""
    value = data.get(name, default)
    if value is None and default is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ApiError(400, tr("{name}: expected an integer from {low} to {high}, got {value!r}", name=name, low=low,
                               high=high, value=shortened(value)))
    return value


@overload
def number_field(data: dict[str, Any], name: str, default: float) -> float: ...
@overload
def number_field(data: dict[str, Any], name: str, default: None) -> float | None: ...
def number_field(data: dict[str, Any], name: str, default: float | None) -> float | None:
    """A finite number, or ``default`` (None: the field may be null)."""
    value = data.get(name, default)
    if value is None and default is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ApiError(400, tr("{name}: expected a finite number, got {value!r}", name=name, value=shortened(value)))
    return float(value)


def choice_field(data: dict[str, Any], name: str, choices: tuple[str, ...] | list[str], default: str) -> str:
    value = data.get(name, default)
    if value not in choices:
        raise ApiError(400, tr("{name}: expected one of {choices}, got {value!r}", name=name,
                               choices=", ".join(choices), value=shortened(value)))
    return value


def heads_field(data: dict[str, Any], name: str, layers: int, heads: int) -> frozenset[tuple[int, int]]:
    """A list of ``[layer, head]`` pairs, each in range (the heads switched off, or those asked for)."""
    value = data.get(name, [])
    pairs = value if isinstance(value, list) else None
    if pairs is None or not all(isinstance(p, list) and len(p) == 2 and all(
            isinstance(i, int) and not isinstance(i, bool) for i in p) for p in pairs):
        raise ApiError(400, tr("{name}: expected a list of [layer, head] pairs, got {value!r}", name=name,
                               value=shortened(value)))
    for layer, head in pairs:
        if not (0 <= layer < layers and 0 <= head < heads):
            raise ApiError(400, tr("{name}: [{layer}, {head}] is not a head of this model ({layers} layers × {heads} "
                                   "heads, counted from 0)", name=name, layer=layer, head=head, layers=layers,
                                   heads=heads))
    return frozenset((layer, head) for layer, head in pairs)


def head_object(data: dict[str, Any], name: str, layers: int, heads: int) -> tuple[int, int] | None:
    """An object ``{"layer", "head"}`` naming one head (each 0 when left out), or None when the field is absent; a
    bad member is named as ``name.layer`` or ``name.head``."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ApiError(400, tr("{name}: expected an object {{\"layer\", \"head\"}}, got {value!r}", name=name,
                               value=shortened(value)))
    known_fields(value, ("layer", "head"))
    return (int_field({f"{name}.layer": value.get("layer", 0)}, f"{name}.layer", 0, layers - 1, 0),
            int_field({f"{name}.head": value.get("head", 0)}, f"{name}.head", 0, heads - 1, 0))


def heads_by_attention(data: dict[str, Any], name: str, layers: dict[str, int],
                       heads: int) -> frozenset[tuple[str, int, int]]:
    """An object ``{attention: [[layer, head], ...]}`` (a translation model's attentions, ``layers`` each's
    depth), every pair in range: ``(attention, layer, head)`` triples. An empty list is no head."""
    value = data.get(name, {})
    if value == []:
        return frozenset()
    if not isinstance(value, dict):
        raise ApiError(400, tr("{name}: a translation model has {n} attentions; expected an object {{{attentions}}} "
                               "of [layer, head] lists, got {value!r}", name=name, n=len(layers),
                               attentions=", ".join(layers), value=shortened(value)))
    known_fields(value, tuple(layers))
    return frozenset((mode, layer, head) for mode, pairs in value.items()
                     for layer, head in heads_field({f"{name}.{mode}": pairs}, f"{name}.{mode}", layers[mode], heads))


def shortened(value: Any) -> Any:
    """A value as an error quotes it: a long string or list cut short."""
    text = repr(value)
    return value if len(text) <= 60 else text[:57] + "..."
