"""A font inside every page attnlab writes: the packaged Noto Sans CJK, cut down to the characters the page shows.

A page that names a font the reader's machine lacks falls back to whatever the browser finds, and on a machine with
no CJK font (a fresh Linux server, a container) every Chinese character becomes a box. The PNGs never have that
problem: matplotlib draws them with the packaged Noto Sans CJK (:mod:`attnlab.viz.fonts`). The pages get the same
font, embedded: fontTools' subsetter keeps the glyphs of the characters on the page (a few dozen kilobytes where the
whole collection is 19 MB), saved as WOFF2 and inlined as a ``data:`` URL in an ``@font-face`` rule, so the page
needs no file beside it and no request off the machine.

Example:
    >>> css = font_face_css("注意力 attention")          # doctest: +SKIP
    >>> css.startswith("@font-face")                   # doctest: +SKIP
    True
"""

from __future__ import annotations

import base64
import functools
import io

from attnlab.viz.fonts import cjk_font_path

#: the CSS family name the embedded subset is declared under; pages list it after their Latin fonts
FAMILY = "attnlab Noto Sans CJK"
#: the face of the collection the subset is cut from: Simplified Chinese forms, as the texts print them
FACE = "Noto Sans CJK SC"
#: what every page shows besides its own text: digits, Latin letters, the punctuation of numbers and tables
ALWAYS = "".join(chr(c) for c in range(0x20, 0x7F)) + "·×÷√−→←↑↓…–—‘’“”，。：；、！？（）《》·％"


def font_stack(*first: str) -> str:
    """A CSS ``font-family`` value: ``first`` (Latin fonts, quoted as needed), then the embedded face."""
    names = [*first, FAMILY, "sans-serif"]
    return ", ".join(name if name in ("sans-serif", "serif", "monospace", "system-ui") else f'"{name}"'
                     for name in names)


def font_face_css(text: str) -> str:
    """An ``@font-face`` rule declaring :data:`FAMILY` with the glyphs of every character of ``text`` (and
    :data:`ALWAYS`), as an inline WOFF2 file. Without the font package (extra ``viz``): an empty string, and the
    page falls back to the reader's fonts."""
    try:
        data = _subset(frozenset(text) | frozenset(ALWAYS))
    except ImportError:
        return ""
    encoded = base64.b64encode(data).decode("ascii")
    return (f"@font-face {{ font-family: \"{FAMILY}\"; font-style: normal; font-weight: 400; font-display: block; "
            f"src: url(data:font/woff2;base64,{encoded}) format(\"woff2\"); }}")


@functools.lru_cache(maxsize=32)
def _subset(characters: frozenset[str]) -> bytes:
    """The WOFF2 bytes of :data:`FACE` holding the glyphs of ``characters`` (a second page with the same
    characters is not cut again)."""
    from fontTools import subset
    from fontTools.ttLib import TTCollection, TTFont

    path = str(cjk_font_path())
    with TTCollection(path, lazy=True) as collection:
        number = next(i for i, face in enumerate(collection.fonts) if face["name"].getDebugName(1) == FACE)
    font = TTFont(path, fontNumber=number, lazy=True)
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
    """Whether ``css`` (from :func:`font_face_css`) carries a glyph for every character of ``text`` that the face
    has: for tests and for a page that adds text after it was written."""
    from fontTools.ttLib import TTFont

    if not css:
        return False
    encoded = css.split("base64,", 1)[1].split(")", 1)[0]
    font = TTFont(io.BytesIO(base64.b64decode(encoded)))
    cmap = font.getBestCmap()
    return all(ord(ch) in cmap for ch in text if not ch.isspace())
