"""Model names: one stable English label per model, shown in the reader's language.

A model's ``name`` is data: ``explain --json`` prints it and it must not change with ``--lang``. Headings and
figure titles show it through :func:`shown_name`, which translates the labels made from the templates below
(``random scaled (seed 123)`` -> ``随机 scaled 模型（种子 123）``) and any label that is itself a catalog message.
"""

from __future__ import annotations

import re

from attnlab.i18n import N_, _

RANDOM = N_("random {mechanism} (seed {seed})")
TRANSLATION = N_("translation model ({name})")
TRAINED_GPT = N_("trained GPT ({name})")
TRAINED_MODERN = N_("trained modern decoder ({name})")
TEMPLATES = (RANDOM, TRANSLATION, TRAINED_GPT, TRAINED_MODERN)


def _pattern(template: str) -> re.Pattern[str]:
    """A regex that matches what ``template.format(...)`` makes, one named group per field."""
    parts = re.split(r"\{(\w+)\}", template)  # literal, field, literal, ...
    return re.compile("".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+)" for i, p in enumerate(parts)))


_PATTERNS = [(template, _pattern(template)) for template in TEMPLATES]


def shown_name(model_name: str) -> str:
    """``model_name`` as a reader sees it in headings and titles: in the reader's language where attnlab made it."""
    for template, pattern in _PATTERNS:
        named = pattern.fullmatch(model_name)
        if named:
            return _(template).format(**named.groupdict())
    return _(model_name) if model_name else model_name
