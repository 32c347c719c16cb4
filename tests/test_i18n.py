"""The catalogs: every message marked in the source has its Chinese translation, with the same fields, and the
compiled catalog that ships is the one its .po compiles to. The language follows --lang, then ATTNLAB_LANG, then
the locale.

After adding messages: ``make messages`` (extract, merge into the .po, compile), translate what this test lists,
``make messages`` again.
"""

import ast
import io
import re
from collections import Counter
from pathlib import Path

import pytest
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.mofile import read_mo, write_mo
from babel.messages.pofile import read_po

from attnlab import i18n
from attnlab.i18n import LOCALES, N_, _, detect_language, language, set_language, tr

SRC = Path(__file__).resolve().parents[1] / "src" / "attnlab"
KEYWORDS = {**DEFAULT_KEYWORDS, "tr": None}
FIELD = re.compile(r"\{[^{}]*\}")  # {name}, {name!r}, {x:.4f}; {{ and }} are literal braces
MARKUP = re.compile(r"\[/?(?:bold|dim|yellow|red|green|reverse|italic)?\]|\[/?(?:bold|dim|yellow|red|green)\b[^\]]*\]")


def source_messages() -> set[str]:
    """Every message marked in the package's source, as babel extracts it (what ``make messages`` does)."""
    found = set()
    for _path, _line, message, _comments, _context in extract_from_dir(str(SRC), keywords=KEYWORDS):
        found |= {m for m in (message if isinstance(message, tuple) else (message,)) if m}
    return found


def zh_catalog():
    with open(LOCALES / "zh" / "LC_MESSAGES" / "attnlab.po", "rb") as f:
        return read_po(f)


def test_every_message_has_its_chinese_translation():
    catalog = zh_catalog()
    messages = source_messages()
    assert len(messages) > 400
    missing = sorted(m for m in messages if m not in catalog or not catalog[m].string)
    fuzzy = sorted(m for m in messages if m in catalog and catalog[m].fuzzy)
    assert not missing and not fuzzy, ("run `make messages` and translate in src/attnlab/locales/zh/LC_MESSAGES/"
                                       f"attnlab.po: untranslated {missing}, fuzzy {fuzzy}")


def test_a_translation_keeps_the_fields_and_the_markup():
    """The same ``{fields}`` (conversions and format specs too), rich markup tags and line breaks."""
    wrong = [m.id for m in zh_catalog() if m.id and m.string and (
        Counter(FIELD.findall(m.string)) != Counter(FIELD.findall(m.id))
        or Counter(MARKUP.findall(m.string)) != Counter(MARKUP.findall(m.id))
        or m.string.count("\n") != m.id.count("\n"))]
    assert not wrong


def entries(catalog) -> tuple[set, dict]:
    """A catalog's translated messages and its header, without the line naming the babel that wrote it."""
    def frozen(text):
        return tuple(text) if isinstance(text, (list, tuple)) else text
    messages = {(frozen(m.id), frozen(m.string), m.context) for m in catalog
                if m.id and m.string and not m.fuzzy}
    return messages, {k: v for k, v in catalog.mime_headers if k != "Generated-By"}


def test_the_shipped_catalog_is_the_po_compiled():
    """Compared message by message, not byte by byte: each babel writes its own version into the .mo."""
    compiled = io.BytesIO()
    write_mo(compiled, zh_catalog(), use_fuzzy=False)
    with open(LOCALES / "zh" / "LC_MESSAGES" / "attnlab.mo", "rb") as f:
        shipped = entries(read_mo(f))
    expected = entries(read_mo(io.BytesIO(compiled.getvalue())))
    assert len(expected[0]) > 400
    assert shipped == expected, "run `make messages`"


def test_messages_are_templates_not_formatted_strings():
    """``tr("… {x} …", x=x)``: the catalog key is the literal template, never an f-string or a variable (``_`` may
    translate a variable holding a message marked with ``N_`` elsewhere)."""
    wrong = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            marked = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("tr", "N_")
            literal = marked and node.args and isinstance(node.args[0], ast.Constant) and isinstance(
                node.args[0].value, str)
            if marked and not literal:
                wrong.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not wrong


def test_english_is_the_message_as_written(monkeypatch):
    monkeypatch.setenv("ATTNLAB_LANG", "en")
    assert tr("{name} must be a positive int, got {value!r}", name="batch", value=0) == \
        "batch must be a positive int, got 0"
    assert tr("{owner}: no blocks.{{i}} parameters found; got {params}...", owner="GPT", params=[]) == \
        "GPT: no blocks.{i} parameters found; got []..."


def test_chinese_fills_the_same_fields(monkeypatch):
    set_language("zh")
    assert tr("{name} must be a positive int, got {value!r}", name="batch", value=0) == "batch 必须是正整数，实际为 0"
    assert _("Usage:") == "用法：" and N_("Usage:") == "Usage:"


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "en"),
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "en_US.UTF-8", "LC_MESSAGES": "zh_TW.UTF-8"}, "zh"),
    ({"LC_MESSAGES": "zh_CN", "LC_ALL": "en_GB.UTF-8"}, "en"),  # LC_ALL wins over LC_MESSAGES
    ({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, "zh"),  # C names no language: the next variable decides
    ({"LANG": "fr_FR.UTF-8"}, "en"),  # a language without a catalog: English
    ({"ATTNLAB_LANG": "zh", "LC_ALL": "en_US.UTF-8"}, "zh"),  # ATTNLAB_LANG wins over the locale
    ({"ATTNLAB_LANG": "en", "LANG": "zh_CN.UTF-8"}, "en"),
])
def test_the_language_comes_from_attnlab_lang_then_the_locale(monkeypatch, env, expected):
    for var in ("ATTNLAB_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert detect_language() == expected == language()


def test_set_language_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("ATTNLAB_LANG", "en")
    assert set_language("zh_CN") == "zh" and language() == "zh"
    assert set_language(None) == "en"
    with pytest.raises(ValueError, match="lang must be one of en, zh"):
        set_language("klingon")


def test_every_catalog_language_is_offered():
    shipped = {p.parent.parent.name for p in LOCALES.glob("*/LC_MESSAGES/attnlab.mo")}
    assert shipped | {"en"} == set(i18n.LANGUAGES)


BUILDING_BLOCKS = ("functional", "attention", "layers", "numpy", "arguments.py")


def test_the_building_blocks_raise_plain_english():
    """functional/, attention/, layers/, numpy/ and arguments.py speak to programs, as torch does: they import no
    catalog (docs/translations.md says why); what the command line hands them is checked, translated, above."""
    paths = [p for name in BUILDING_BLOCKS for p in ([SRC / name] if name.endswith(".py") else
                                                     sorted((SRC / name).rglob("*.py")))]
    assert len(paths) > 30
    wrong = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if "attnlab.i18n" in names:
                wrong.append(str(path.relative_to(SRC)))
    assert not wrong
