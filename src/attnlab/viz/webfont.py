"""A font inside every page attnlab writes: the packaged Noto Sans CJK, cut down to the characters the page shows.

A page that names a font the reader's machine lacks falls back to whatever the browser finds, and on a machine with
no CJK font (a fresh Linux server, a container) every Chinese character becomes a box. The PNGs never have that
problem: matplotlib draws them with the packaged Noto Sans CJK (:mod:`attnlab.viz.fonts`). The pages get the same
font, embedded: fontTools' subsetter keeps the glyphs of the characters on the page (a few dozen kilobytes where the
whole collection is 19 MB), saved as WOFF2 and inlined as a ``data:`` URL in an ``@font-face`` rule, so the page
needs no file beside it and no request off the machine. The few characters of a page that Noto Sans CJK lacks (``ᵀ``
of ``Xᵀ``, the ``✗`` of a wrong translation) come from matplotlib's DejaVu Sans, the figures' own Latin font, in a
second rule: every character a page shows is in a font it carries, so the browser never has to find one.

The embedded faces come first in a page's font stack, each limited by ``unicode-range`` to what is not ASCII, and the
reader's Latin fonts after them draw the ASCII: listed the other way round, Chromium on Linux asks the system for a
character the first installed font lacks and, finding no CJK font there, draws a box rather than go on down the list
(seen with ``system-ui`` or ``DejaVu Sans`` first on a machine with no CJK font).

Example:
    >>> css = font_face_css("注意力 attention")          # doctest: +SKIP
    >>> css.startswith("@font-face")                   # doctest: +SKIP
    True
"""

from __future__ import annotations

import base64
import functools
import io
import re
from pathlib import Path

from attnlab.viz.fonts import cjk_font_path

#: the CSS family name the embedded subset is declared under; pages list it after their Latin fonts
FAMILY = "attnlab Noto Sans CJK"
#: the family of what Noto Sans CJK lacks, cut from matplotlib's DejaVu Sans; listed after :data:`FAMILY`
SYMBOLS = "attnlab DejaVu Sans"
#: the face of the collection the subset is cut from: Simplified Chinese forms, as the texts print them
FACE = "Noto Sans CJK SC"
#: what every page shows besides its own text: digits, Latin letters, the punctuation of numbers and tables
ALWAYS = "".join(chr(c) for c in range(0x20, 0x7F)) + "·×÷√−→←↑↓…–—‘’“”，。：；、！？（）《》·％"


def font_stack(*latin: str) -> str:
    """A CSS ``font-family`` value: the embedded faces (everything but ASCII, see the module), then ``latin`` (the
    Latin fonts, quoted as needed) for the ASCII."""
    names = [FAMILY, SYMBOLS, *latin, "sans-serif"]
    return ", ".join(name if name in ("sans-serif", "serif", "monospace", "system-ui") else f'"{name}"'
                     for name in names)


def font_face_css(text: str) -> str:
    """``@font-face`` rules declaring :data:`FAMILY` with the glyphs of every character of ``text`` (and
    :data:`ALWAYS`) and, for the characters Noto Sans CJK lacks, :data:`SYMBOLS`, as inline WOFF2 files. Without
    the font package (extra ``viz``): an empty string, and the page falls back to the reader's fonts."""
    characters = frozenset(c for c in text if not c.isspace()) | frozenset(ALWAYS)
    try:
        noto = _noto_characters()
    except ImportError:
        return ""
    rules = [_rule(FAMILY, characters & noto, _subset(characters & noto))]
    if characters - noto:
        rules.append(_rule(SYMBOLS, characters - noto, _subset(characters - noto, symbols=True)))
    return " ".join(rules)


def _rule(family: str, characters: frozenset[str], data: bytes) -> str:
    """The ``@font-face`` of ``family``: ``data`` (WOFF2) for ``characters`` that are not ASCII."""
    encoded = base64.b64encode(data).decode("ascii")
    return (f"@font-face {{ font-family: \"{family}\"; font-style: normal; font-weight: 400; font-display: block; "
            f"unicode-range: {unicode_range(characters)}; "
            f"src: url(data:font/woff2;base64,{encoded}) format(\"woff2\"); }}")


def unicode_range(characters: frozenset[str]) -> str:
    """CSS ``unicode-range`` of ``characters`` outside ASCII, consecutive code points as one range: ``U+4E00-4E01``
    (``U+0`` for none, a range no text uses)."""
    points = sorted(ord(c) for c in characters if ord(c) > 0x7F)
    spans: list[list[int]] = []
    for point in points:
        if spans and point == spans[-1][1] + 1:
            spans[-1][1] = point
        else:
            spans.append([point, point])
    return ", ".join(f"U+{a:X}" if a == b else f"U+{a:X}-{b:X}" for a, b in spans) or "U+0"


def _dejavu_path() -> Path:
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"


def _open(symbols: bool):
    """The face a subset is cut from: :data:`FACE` of the packaged collection, or DejaVu Sans (``symbols``)."""
    from fontTools.ttLib import TTCollection, TTFont

    if symbols:
        return TTFont(str(_dejavu_path()), lazy=True)
    path = str(cjk_font_path())
    with TTCollection(path, lazy=True) as collection:
        number = next(i for i, face in enumerate(collection.fonts) if face["name"].getDebugName(1) == FACE)
    return TTFont(path, fontNumber=number, lazy=True)


@functools.cache
def _noto_characters() -> frozenset[str]:
    """Every character :data:`FACE` has a glyph for."""
    return frozenset(chr(c) for c in _open(symbols=False).getBestCmap())


@functools.lru_cache(maxsize=32)
def _subset(characters: frozenset[str], symbols: bool = False) -> bytes:
    """The WOFF2 bytes of :data:`FACE` (or, ``symbols``, of DejaVu Sans) holding the glyphs of ``characters`` (a
    second page with the same characters is not cut again)."""
    from fontTools import subset

    font = _open(symbols)
    options = subset.Options()
    options.layout_features = ["*"]  # vertical forms and locale variants stay usable
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(text="".join(sorted(characters)))
    subsetter.subset(font)
    font.flavor = "woff2"  # Brotli-compressed: about a third of the OpenType bytes
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


def covered(text: str, css: str) -> bool:
    """Whether the fonts ``css`` embeds (from :func:`font_face_css`) carry a glyph for every character of ``text``,
    whitespace aside: for tests and for a page that adds text after it was written."""
    from fontTools.ttLib import TTFont

    cmap: set[int] = set()
    for encoded in re.findall(r"base64,([A-Za-z0-9+/=]+)\)", css):
        cmap |= set(TTFont(io.BytesIO(base64.b64decode(encoded))).getBestCmap())
    return bool(cmap) and all(ord(ch) in cmap for ch in text if not ch.isspace())
