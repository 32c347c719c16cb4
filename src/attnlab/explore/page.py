"""The page, assembled from the files in ``assets/``: for the server, for a snapshot, and for the notebook widget.

The scripts are plain functions in one scope, concatenated in :data:`SCRIPTS` order: inside one ``<script>`` for
the page (its boot data beside it in a JSON block), or as the ES module anywidget loads (``export default
{render}``). Everything is inline, the CJK faces included, so the page asks nothing of any other machine.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any

#: the page's scripts, in the order they are joined (later files call earlier ones)
SCRIPTS = ("core.js", "transport.js", "overview.js", "matrix.js", "steps.js", "next.js", "generate.js", "patch.js",
           "export.js", "app.js")
TEMPLATE = """<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{policy}<title>{title}</title>
<style>{font}</style>
<style>{css}</style>
</head>
<body>
<div id="explore"></div>
<script type="application/json" id="attnlab-boot">{boot}</script>
<script{nonce}>
(function () {{
{js}
bootPage();
}})();
</script>
</body>
</html>
"""


def asset(name: str) -> str:
    return resources.files("attnlab.explore").joinpath("assets", name).read_text(encoding="utf-8")


def scripts() -> str:
    return "\n".join(asset(name) for name in SCRIPTS)


def json_for_script(obj: Any) -> str:
    """JSON that cannot end the ``<script>`` block it sits in, nor start an HTML comment or entity."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def page_html(boot: dict[str, Any], font_css: str, nonce: str | None = None, policy: str | None = None) -> str:
    """The whole page: ``boot`` (models, catalog, token or snapshot) and ``font_css`` inline; the script allowed
    by ``nonce`` (the server's Content-Security-Policy), or ``policy`` as a ``<meta>`` (a snapshot, opened from a
    file)."""
    meta = f'<meta http-equiv="Content-Security-Policy" content="{html.escape(policy)}">\n' if policy else ""
    parts = {"lang": "zh-Hans" if boot.get("lang") == "zh" else "en", "policy": meta,
             "title": html.escape(boot["strings"][boot.get("lang", "en")]["title"]),
             "font": font_css.replace("</", "<\\/"), "css": asset("explore.css"), "boot": json_for_script(boot),
             "nonce": f' nonce="{nonce}"' if nonce else "", "js": scripts()}
    return re.sub(r"\{(\w+)\}", lambda m: parts[m.group(1)], TEMPLATE.replace("{{", "\0").replace("}}", "\1")) \
        .replace("\0", "{").replace("\1", "}")


def widget_module() -> str:
    """The ES module of the notebook widget: the same scripts, rendering into the widget's element."""
    return scripts() + "\n" + asset("widget.js")
