"""The explorer's CJK glyphs: the packaged Noto Sans CJK cut by :mod:`attnlab.viz.webfont`, once per launch for
the page, and again for what the page shows later.

A cut takes about two seconds (fontTools parses the 19 MB collection each time: 0.7 s for 4 characters, 2.0 s for
600, measured), so the page is not cut anew for every text. At launch, one cut holds the glyphs of every word of
the page in both languages (:mod:`attnlab.explore.catalog`) and of the models' starting texts; it is the face every
attnlab page declares (``webfont.FAMILY``). A character the page meets later (a token, a typed word, a message)
that no face of it has is sent to ``POST /api/font``, which cuts those characters alone, under a family name of
their own (``FAMILY 2``, ``FAMILY 3``, ...): the page appends each to its ``font-family`` list, and the browser
takes every glyph from the first family that has it. The numbers never wait for a glyph.
"""

from __future__ import annotations

import threading
from typing import Any

from attnlab.viz.webfont import ALWAYS, FAMILY, font_face_css


class FontCuts:
    """The faces cut so far: ``base`` for the page, then one per ``cut`` of characters it did not cover."""

    #: the most characters one cut takes (a text of 100,000 CJK characters is cut in pieces the page asks for)
    MAX_CHARS = 4096

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._cuts: dict[frozenset[str], dict[str, Any]] = {}

    def base(self, text: str) -> dict[str, Any]:
        """The launch face: the glyphs of ``text`` (the page's words and starting texts) and of :data:`ALWAYS`."""
        chars = _visible(text + ALWAYS)
        return {"family": FAMILY, "css": font_face_css(chars), "chars": chars}

    def cut(self, chars: str) -> dict[str, Any]:
        """A face with the glyphs of ``chars``, under a family name of its own (the same characters: the same
        face). The caller holds :attr:`lock` (cuts are numbered in order)."""
        wanted = frozenset(_visible(chars))
        if wanted not in self._cuts:
            family = f"{FAMILY} {len(self._cuts) + 2}"
            css = font_face_css("".join(sorted(wanted))).replace(f'font-family: "{FAMILY}"',
                                                                   f'font-family: "{family}"', 1)
            self._cuts[wanted] = {"family": family, "css": css, "chars": "".join(sorted(wanted))}
        return self._cuts[wanted]


def _visible(text: str) -> str:
    """The distinct characters of ``text`` that need a glyph, in order."""
    return "".join(sorted({ch for ch in text if not ch.isspace()}))
