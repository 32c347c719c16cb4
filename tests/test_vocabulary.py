"""One concept, one name: no public argument, config field, attribute or method of attnlab is spelled as
docs/vocabulary.md says it is not (its table's third column)."""

import dataclasses
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import attnlab

DOCS = Path(__file__).resolve().parents[1] / "docs"


def not_names(path: Path) -> tuple[set[str], set[str]]:
    """The names the table rules out: plain identifiers, and ``Class.method(...)`` that no class may define."""
    names, methods = set(), set()
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or set(cells[0]) <= {"-"}:
            continue
        for code in re.findall(r"`([^`]+)`", cells[2]):
            if re.fullmatch(r"[A-Za-z_]\w*", code):
                names.add(code)
            elif m := re.fullmatch(r"[A-Za-z_]\w*\.([A-Za-z_]\w*)\(.*\)", code):
                methods.add(m.group(1))
    return names, methods


def packages():
    """attnlab's packages: their ``__all__`` is the public API."""
    for info in pkgutil.walk_packages(attnlab.__path__, "attnlab."):
        if info.ispkg and not any(part.startswith("_") for part in info.name.split(".")):
            yield importlib.import_module(info.name)


def params(fn) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def public_names() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Every public name of attnlab -> where it stands (exported functions and classes, their parameters, a
    class's public methods and their parameters, a dataclass's fields); and the methods alone."""
    found: dict[str, set[str]] = {}
    methods: dict[str, set[str]] = {}

    def add(name: str, where: str) -> None:
        found.setdefault(name, set()).add(where)

    for package in packages():
        for name in getattr(package, "__all__", ()):
            obj = getattr(package, name)
            where = f"{package.__name__}.{name}"
            add(name, where)
            if inspect.isfunction(obj):
                for p in params(obj):
                    add(p, where)
            elif inspect.isclass(obj):
                if dataclasses.is_dataclass(obj):
                    for f in dataclasses.fields(obj):
                        add(f.name, f"{where} (field)")
                for attr, member in vars(obj).items():
                    if attr.startswith("_") and attr != "__init__":
                        continue
                    add(attr, f"{where}.{attr}")
                    fn = member.__func__ if isinstance(member, classmethod | staticmethod) else member
                    if callable(fn):
                        methods.setdefault(attr, set()).add(f"{where}.{attr}")
                        for p in params(fn):
                            add(p, f"{where}.{attr}")
    return found, methods


NAMES, METHODS = public_names()
#: where a ruled-out word names another concept, and why: nowhere else
OTHER_CONCEPTS = {
    "mask": ({"attnlab.functional.math_attention", "attnlab.functional.attention_scores",
              "attnlab.functional.attention_weights", "attnlab.functional.and_masks", "attnlab.numpy.math_attention",
              "attnlab.numpy.attention_scores", "attnlab.attention.MultiHeadAttention.attend",
              "attnlab.attention.MultiHeadAttention.visible", "attnlab.attention.LatentAttention.attend",
              "attnlab.attention.LatentAttention.visible", "attnlab.attention.LatentAttention.naive",
              "attnlab.attention.LatentAttention.absorbed",
              "attnlab.functional.CallKind (field)", "attnlab.functional.CallKind.__init__",
              "attnlab.functional.CallKind.mask"},
             "the op's own mask, padding and causal already merged (and the kind of mask a call has), not a padding "
             "mask given by a user"),
    "context": ({"attnlab.inspect.Explanation (field)", "attnlab.inspect.Explanation.__init__",
                 "attnlab.attention.LatentAttention.merge"},
                "the context vectors (the book's context_vec), not the sequence attended to"),
}


@pytest.mark.parametrize("doc", ["vocabulary.md", "zh/vocabulary.md"])
def test_no_public_name_is_one_the_vocabulary_rules_out(doc):
    names, methods = not_names(DOCS / doc)
    assert "norm_first" in names and "pad_token_id" in names and "preset" in methods  # the table was read
    wrong = {n: sorted(NAMES[n] - OTHER_CONCEPTS.get(n, (set(),))[0]) for n in sorted(names) if n in NAMES}
    wrong = {n: where for n, where in wrong.items() if where}
    assert not wrong, f"names docs/{doc} rules out: {wrong}"
    defined = {m: sorted(METHODS[m]) for m in methods if m in METHODS}
    assert not defined, f"methods docs/{doc} rules out: {defined}"


def test_the_rule_catches_a_ruled_out_name():
    def f(x, n_heads=1):
        return x

    assert "n_heads" in params(f) and "n_heads" in not_names(DOCS / "vocabulary.md")[0]
