"""Fonts that draw Chinese, Japanese and Korean tokens as glyphs, not empty boxes.

matplotlib's default font (DejaVu Sans) has no CJK glyphs, and the fonts an OS happens to have
differ from machine to machine. attnlab depends (extra ``viz``) on the PyPI package
``noto-cjk-sans-otc``, which ships Noto Sans CJK (SIL Open Font License 1.1) as one OpenType
collection. :func:`setup_fonts` registers it with matplotlib's font manager and sets a family
*fallback list*: matplotlib (≥ 3.6) draws each glyph with the first family in the list that has it,
so Latin text keeps DejaVu Sans and CJK text falls back to Noto Sans CJK.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matplotlib import font_manager, rc_context

from attnlab.i18n import tr

#: The fallback list: Latin first, then one Noto Sans CJK face (all faces cover the same code points;
#: the SC face draws Han characters in their Simplified Chinese forms).
FAMILIES: list[str] = ["DejaVu Sans", "Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK KR"]
INSTALL_HINT = 'pip install "attnlab[viz]"  (installs noto-cjk-sans-otc, the Noto Sans CJK font)'


def cjk_font_path() -> Path:
    """Path of the packaged Noto Sans CJK collection; an ImportError says how to install it."""
    try:
        import noto_cjk_sans_otc
    except ImportError as e:
        raise ImportError(tr("the CJK font package is not installed: {install_hint}", install_hint=INSTALL_HINT)) from e
    return Path(str(noto_cjk_sans_otc.FONT_PATH))


@functools.cache
def setup_fonts() -> list[str]:
    """Register the CJK font with matplotlib (once per process) and return the family fallback list.

    Use the list as ``fontfamily=`` on text. Without the font package the list is Latin only, and
    :func:`require_glyphs` says how to install the font when a text needs it.
    """
    try:
        path = cjk_font_path()
    except ImportError:
        return FAMILIES[:1]
    if str(path) not in {f.fname for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(path))
    return list(FAMILIES)


def drawn_in_every_script(figure_function: Callable[..., Any]) -> Callable[..., Any]:
    """A function that makes a figure, its texts made under the fallback list: the titles, axes and legends of a
    Chinese run draw as Chinese, not as boxes (matplotlib fixes a text's font when the text is made)."""

    @functools.wraps(figure_function)
    def made(*args: Any, **kwargs: Any) -> Any:
        with rc_context({"font.family": setup_fonts()}):
            return figure_function(*args, **kwargs)

    return made


def require_glyphs(text: str) -> list[str]:
    """The fallback list, after checking it can draw every character of ``text``.

    Raises:
        ImportError: a character has no glyph (CJK text without the font package): says what to install.
    """
    families = setup_fonts()
    missing = missing_glyphs(text, families)
    if missing:
        shown = "".join(sorted(missing)[:10])
        raise ImportError(tr("no font here can draw {shown!r}; {install_hint}", shown=shown, install_hint=INSTALL_HINT))
    return families


def fonts_for(families: list[str]) -> list:
    """The font files matplotlib picks for a fallback list, in order (``FT2Font`` objects)."""
    from matplotlib.font_manager import FontProperties

    # _find_fonts_by_props is what matplotlib's own text layout uses to build its fallback chain.
    paths = font_manager.fontManager._find_fonts_by_props(FontProperties(family=families))
    return [font_manager.get_font(p) for p in paths]


def missing_glyphs(text: str, families: list[str] | None = None) -> set[str]:
    """The characters of ``text`` that no font of the fallback list can draw (whitespace ignored)."""
    charmaps = [f.get_charmap() for f in fonts_for(families or setup_fonts())]
    return {c for c in text if not c.isspace() and not any(ord(c) in cm for cm in charmaps)}
