"""Every list of things is written once, in the registry that owns it, and read from there everywhere else.

A literal tuple, list, set or dict (or a ``Literal[...]``) anywhere in ``src/`` that names two or more members of one
of these lists is a second copy, which drifts the day a member is added: this test finds it.
"""

import ast
from pathlib import Path
from typing import get_args

import pytest

from attnlab.data import TASKS, TOKENIZERS
from attnlab.functional.backends import BACKENDS, KERNELS, Backend
from attnlab.models import ARCHITECTURES, DTYPES, SCHEMES

SRC = Path(__file__).resolve().parents[1] / "src" / "attnlab"
DOCS = Path(__file__).resolve().parents[1] / "docs"

PRESETS = {p for a in ARCHITECTURES.values() for p in a.presets}
# list -> (its members, the files allowed to name them together: its home)
LISTS = {
    "backends": (set(BACKENDS), {"functional/backends.py",
                                 "numpy/checks.py"}),  # the NumPy twin's own backends, a subset with its own rule
    "architectures": (set(ARCHITECTURES), {"models/registry.py"}),
    "dtypes": (set(DTYPES), {"models/config.py"}),
    "presets": (PRESETS, {"models/gpt.py", "models/modern/decoder.py", "models/encoder.py",
                          "models/transformer/config.py", "models/modern/diffllama.py", "models/modern/smollm3.py",
                          "models/modern/qwen3_next.py", "models/modern/deepseek.py",
                          "models/modern/gemma4.py", "models/modern/kimi_linear.py"}),
    "tokenizers": (set(TOKENIZERS), {"data/tokenizer.py"}),
    "tasks": (set(TASKS), {"data/tasks.py"}),
    "quantization schemes": (set(SCHEMES), {"models/quantize.py"}),
}


def literal_collections(tree: ast.AST):
    """``(line, the string members)`` of every literal collection in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        strings = {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        if len(strings) >= 2:
            yield node.lineno, strings


def second_copies(name: str) -> list[str]:
    members, homes = LISTS[name]
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in homes:
            continue
        for line, strings in literal_collections(ast.parse(path.read_text(encoding="utf-8"))):
            named = sorted(strings & members)
            if len(named) >= 2:
                found.append(f"{rel}:{line} names {named}")
    return found


@pytest.mark.parametrize("name", sorted(LISTS))
def test_a_list_is_typed_once(name):
    assert not second_copies(name), f"the {name} are listed again; read them from their registry instead"


def test_the_rule_catches_a_second_copy(tmp_path):
    tree = ast.parse('CHOICES = click.Choice(["gpt", "modern"])\nPAIR = ("gpt", 3)\n')
    assert [s for _, s in literal_collections(tree)] == [{"gpt", "modern"}]


def test_the_backend_literal_is_the_table():
    """``Backend`` spells the names once more, for type checkers only: it must say what the table says."""
    assert get_args(Backend) == BACKENDS == ("auto", *KERNELS)


@pytest.mark.parametrize("command", ["train", "train_seq2seq"])
def test_training_flags_show_the_config_defaults(command):
    """The ``[default: …]`` of a training flag is the config field's, read from the dataclass, never typed."""
    import importlib

    from attnlab.cli.config_options import FieldOption, field_default

    cli = importlib.import_module(f"attnlab.cli.{command}")
    config = {"train": "TrainConfig", "train_seq2seq": "Seq2SeqTrainConfig"}[command]
    options = [p for p in cli.command.params if p.name != "lang" and p.name != "help"]
    assert all(isinstance(p, FieldOption) and p.config.__name__ == config for p in options)
    assert not [p.name for p in options if "[default:" in (p.help or "") and field_default(p.config, p.name)]
    assert field_default(options[0].config, "max_iters") == str(options[0].config.max_iters)


@pytest.mark.parametrize("doc", ["layout.md", "zh/layout.md"])
def test_the_docs_list_the_registry(doc):
    """docs/layout.md's table of architectures is the registry's: a row per architecture, with its kind and presets."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip().strip("`"): line for line in text.splitlines() if line.startswith("| `")}
    for name, arch in ARCHITECTURES.items():
        assert name in rows, f"{doc}: no row for {name}"
        row = rows[name]
        assert f"`{arch.config.__name__}`" in row and f"`{arch.model.__name__}`" in row and arch.kind in row
        assert all(f"`{p}`" in row for p in arch.presets), f"{doc}: {name}'s presets"
