"""Model names: one stable English label per model, shown in the reader's language.

A model's ``name`` is data: ``explain --json`` prints it and it must not change with ``--lang``. Headings and
figure titles show it through :func:`shown_name`, which translates the labels made from the templates below
(``random scaled (seed 123)`` -> ``随机缩放点积模型（种子 123）``, the mechanism's name too), a label followed by what
is shown of it (``translation model (dates): cross-attention (decoder → source)``), and any label that is itself a
catalog message.
"""

from __future__ import annotations

from attnlab.i18n import N_, _, made_from, tr

RANDOM = N_("random {mechanism} (seed {seed})")
TRANSLATION = N_("translation model ({name})")
TRAINED_GPT = N_("trained GPT ({name})")
TRAINED_MODERN = N_("trained modern decoder ({name})")
TEMPLATES = (RANDOM, TRANSLATION, TRAINED_GPT, TRAINED_MODERN)
#: the random model's mechanisms (``--mechanism``), marked so that a heading names them in the reader's language
MECHANISM_NAMES = (N_("simple"), N_("scaled"), N_("causal"), N_("multihead"))


def shown_name(model_name: str) -> str:
    """``model_name`` as a reader sees it in headings and titles: in the reader's language where attnlab made it."""
    model, colon, what = model_name.rpartition(": ")
    if colon and made_from(model, TEMPLATES) is not None:  # a model, and what of it is shown (its cross-attention)
        return tr("{model}: {what}", model=shown_name(model), what=_(what))
    shown = made_from(model_name, TEMPLATES, translated=("mechanism",))
    if shown is not None:
        return shown
    return _(model_name) if model_name else model_name
