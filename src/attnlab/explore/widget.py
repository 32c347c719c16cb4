"""The explorer in a notebook: ``attnlab.explore.show(model, text)``, an anywidget.

The widget runs the page's own scripts in the cell (as an ES module); what they would ask the server they send to
the kernel as messages, and :meth:`ExploreWidget.answer` answers them with the same :class:`~attnlab.explore.api.Api`
the server uses. :meth:`ExploreWidget.ask` is that API called from Python, for a notebook cell (or a test) that
reads the very numbers the widget shows.
"""

from __future__ import annotations

from typing import Any

import anywidget
import traitlets

from attnlab.explore.api import Api
from attnlab.explore.checks import ApiError
from attnlab.explore.entry import entry_for
from attnlab.explore.launch import boot_data, launch_font
from attnlab.explore.page import asset, widget_module
from attnlab.i18n import language


class ExploreWidget(anywidget.AnyWidget):
    """The explorer over the models of ``api``, in the language ``lang``."""

    _esm = widget_module()
    _css = asset("explore.css")
    boot = traitlets.Dict().tag(sync=True)

    def __init__(self, api: Api, lang: str | None = None) -> None:
        lang = lang or language()
        boot = boot_data(api, lang)
        boot["font"] = launch_font(api)
        super().__init__(boot=boot)
        self.api, self.lang = api, lang
        self.on_msg(self.answer)

    def ask(self, endpoint: str, body: dict[str, Any] | None = None) -> Any:
        """The answer the page gets to ``endpoint`` with ``body`` (docs/explore.md)."""
        return self.api.call(endpoint, body or {}, self.lang)

    def answer(self, _widget: Any, content: dict[str, Any], _buffers: Any = None) -> None:
        """A message from the page: ``{"id", "endpoint", "body"}`` -> ``{"id", "body"}`` or ``{"id", "error",
        "status"}``."""
        try:
            self.send({"id": content["id"], "body": self.ask(content["endpoint"], content.get("body"))})
        except ApiError as err:
            self.send({"id": content["id"], "error": err.message, "status": err.status})


def show(model: Any, text: str | None = None, tokenizer: Any = None, name: str | None = None,
         lang: str | None = None) -> ExploreWidget:
    """The explorer of ``model`` reading ``text``, as the last line of a notebook cell.

    ``model``: one of attnlab's (a GPT, a modern decoder, the shipped MiniLM with its tokenizer, a translation
    model with its character vocabulary as ``tokenizer``).
    """
    return ExploreWidget(Api([entry_for(model, tokenizer, name, text)]), lang)
