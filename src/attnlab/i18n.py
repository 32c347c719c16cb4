"""Messages in the reader's language: English, or Simplified Chinese (the language of the texts attnlab follows).

The catalogs are GNU gettext's: ``attnlab/locales/<lang>/LC_MESSAGES/attnlab.po`` (the translations, edited by
people) compiled to ``attnlab.mo`` (read here with the standard library). Babel extracts the messages from the
source and updates and compiles the catalogs (``make messages``); a test fails if a message lacks its translation
or a compiled catalog is out of date.

Marking messages:

* ``tr("…")`` translates now; a message with values names its fields, ``tr("got {value!r}", value=v)``, and
  they are filled in after translation, so a translator can move them (the template is the catalog's key:
  never an f-string);
* ``N_("…")`` only marks a message for extraction (help texts written where they are declared), and ``_`` is
  applied when it is shown;
* :func:`made_from` shows in the reader's language a text that is data, made in English from one of a few marked
  templates (a model's name, why a benchmark case was skipped): the data stays English (``--json`` prints it),
  what is shown of it follows ``--lang``.

What is translated: everything a user of the command line reads, the errors its input can cause included. The
building blocks (``functional``, ``attention``, ``layers``, ``numpy``, ``arguments``) raise plain English, as
torch does: they are called by programs with values a config has checked (docs/translations.md).

The language: :func:`set_language` (the CLI's ``--lang``), else ``ATTNLAB_LANG``, else the locale
(``LC_ALL``, ``LC_MESSAGES``, ``LANG``: ``zh…`` means Chinese), else English.
"""

from __future__ import annotations

import functools
import gettext
import os
import re
from collections.abc import Iterable
from pathlib import Path

DOMAIN = "attnlab"
LOCALES = Path(__file__).resolve().parent / "locales"
LANGUAGES = ("en", "zh")
_chosen: str | None = None


def normalise(lang: str) -> str | None:
    """``"zh"``, ``"zh_CN.UTF-8"``, ``"zh-Hans"`` -> ``"zh"``; ``"en_US"`` -> ``"en"``; anything else None."""
    head = lang.strip().replace("-", "_").split(".")[0].split("_")[0].lower()
    return head if head in LANGUAGES else None


def detect_language() -> str:
    """``ATTNLAB_LANG``, then the locale variables, then English."""
    for var in ("ATTNLAB_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var)
        if value and value not in ("C", "POSIX"):
            return normalise(value) or "en"
    return "en"


def set_language(lang: str | None) -> str:
    """Use ``lang`` (``"en"``, ``"zh"``, or a locale name such as ``"zh_CN"``; None: detect again); returns it."""
    global _chosen
    if lang is None:
        _chosen = None
        return language()
    chosen = normalise(lang)
    if chosen is None:
        raise ValueError(tr("lang must be one of {languages} (or a locale such as zh_CN), got {lang!r}",
                            languages=', '.join(LANGUAGES), lang=lang))
    _chosen = chosen
    return chosen


def language() -> str:
    """The language messages are shown in now."""
    return _chosen or detect_language()


@functools.cache
def translations(lang: str) -> gettext.NullTranslations:
    """The compiled catalog of ``lang`` (English: no catalog, messages are shown as written)."""
    if lang == "en":
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, localedir=LOCALES, languages=[lang])


def _(message: str) -> str:
    """``message`` in the current language."""
    return translations(language()).gettext(message)


def N_(message: str) -> str:
    """Mark ``message`` for the catalog without translating it here (it is translated where it is shown)."""
    return message


def tr(message: str, **fields: object) -> str:
    """``message`` in the current language, its named ``{fields}`` filled in after translation.

    ``tr("heads must divide d_out, got num_heads={num_heads}", num_heads=3)``: the catalog holds the
    template, so a translator may move the fields; the values are never translated.
    """
    return _(message).format(**fields) if fields else _(message)


@functools.cache
def _pattern(template: str) -> re.Pattern[str]:
    """A regex that matches what ``template.format(...)`` makes, one named group per field."""
    parts = re.split(r"\{(\w+)(?:![rsa])?(?::[^}]*)?\}", template)  # literal, field, literal, ...
    return re.compile("".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts)))


def made_from(text: str, templates: Iterable[str], translated: Iterable[str] = ()) -> str | None:
    """``text``, made in English by ``template.format(...)`` from one of ``templates`` (marked with ``N_``), in the
    current language, its fields as they were (those named in ``translated``, messages themselves, translated
    too); None if no template made it."""
    for template in templates:
        found = _pattern(template).fullmatch(text)
        if found:
            fields = {k: _(v) if k in translated else v for k, v in found.groupdict().items()}
            return _(template).format(**fields)
    return None
