"""``attnlab explore``: attention you can play with, live, in the browser or a notebook, offline.

A local server (:mod:`attnlab.explore.server`, Starlette on uvicorn) answers a JSON API (:mod:`attnlab.explore.api`)
whose every number is the model's own forward pass (:mod:`attnlab.explore.reading`), attnlab's capture and
explanation (:mod:`attnlab.explore.steps`), ``attnlab.generation``'s sampling and ``generate``
(:mod:`attnlab.explore.next_token`, :mod:`attnlab.explore.cache_view`); the page (``assets/``) only shows them. The
same page runs in a notebook (:func:`show`, an anywidget) and as a snapshot (:mod:`attnlab.explore.snapshot`).

Example:
    >>> from attnlab.explore import show            # doctest: +SKIP
    >>> show(load_bert(), "The cat sat on the mat")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from attnlab.explore.api import Api
from attnlab.explore.entry import Entry, entry_for, load_entries


def show(model: Any, text: str | None = None, tokenizer: Any = None, name: str | None = None,
         lang: str | None = None) -> Any:
    """The explorer of ``model`` in a notebook cell (:func:`attnlab.explore.widget.show`; needs anywidget, the
    ``explore`` extra)."""
    from attnlab.explore.widget import show as widget

    return widget(model, text, tokenizer, name, lang)


__all__ = ["Api", "Entry", "entry_for", "load_entries", "show"]
