"""The package reads like the subject's table of contents, and imports only point down it.

``LAYERS`` is the table: a module may import from its own package or from packages of a lower layer,
never from a package of its own layer (sideways) or of a higher one (upward); and no chain of imports,
lazy ones inside functions included, may lead back to where it started.
"""

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# lowest first; packages on one line are siblings and must not import each other
LAYERS: list[tuple[str, ...]] = [
    ("attnlab",),                                       # the root modules: arguments, files (no torch)
    ("attnlab.functional", "attnlab.data", "attnlab.numpy"),  # the op; corpora and tokenizers; the NumPy twin
    ("attnlab.attention",),                             # the four mechanisms as modules
    ("attnlab.layers",),                                # positions, norms, feed-forward, blocks
    ("attnlab.fast",),                                  # speed, applied to the plain modules: accelerate()
    ("attnlab.models",),                                # whole models, their configs, caches, trained ones
    ("attnlab.pretrained", "attnlab.generation", "attnlab.training"),  # real weights; decoding; training
    ("attnlab.inspect",),                               # the capture and the arithmetic of attention
    ("attnlab.heads",),                                 # what the heads learn: the papers' experiments
    ("attnlab.viz",),                                   # pictures of captures and of runs
    ("attnlab.bench",),                                 # measuring
    ("attnlab.demo",),                                  # the walk-through
    ("attnlab.explore",),                               # the live explorer: a server, its page, the widget
    ("attnlab.cli",),                                   # the command line
    ("attnlab.__main__",),                              # `python -m attnlab`
]
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    """The layer package a module belongs to (``attnlab`` for the root modules)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and ".".join(parts[:2]) in RANK else "attnlab"


def imports(path: Path) -> set[str]:
    """Every ``attnlab`` module imported anywhere in the file (top level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("attnlab")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attnlab"):
            found.add(node.module)
    return found


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}
GRAPH = {name: {m for m in imports(path) if m in MODULES} for name, path in MODULES.items()}


def test_every_package_has_a_layer():
    packages = {package_of(m) for m in MODULES}
    assert packages == set(RANK), f"add the new package(s) to LAYERS: {sorted(packages - set(RANK))}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    mine = package_of(module)
    wrong = [f"{module} -> {target}" for target in sorted(GRAPH[module])
             if package_of(target) != mine and RANK[package_of(target)] >= RANK[mine]]
    assert not wrong, "imports sideways or upward: " + "; ".join(wrong)


def test_no_import_cycles():
    """Depth-first search for a back edge over the module graph (lazy imports count)."""
    state: dict[str, int] = defaultdict(int)  # 0 new, 1 on the stack, 2 done
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(GRAPH[node]):
            if state[nxt] == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif state[nxt] == 0:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for module in sorted(GRAPH):
        if state[module] == 0:
            visit(module, [module])
    assert not cycles, "import cycles: " + "; ".join(cycles)


def test_the_rule_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from attnlab.viz.heatmap import head_figure\n")
    assert imports(bad) == {"attnlab.viz.heatmap"}
    assert RANK[package_of("attnlab.viz.heatmap")] > RANK[package_of("attnlab.models.gpt")]


def test_no_two_modules_share_a_name_across_packages_unless_twins():
    """Same file name in two packages only for the same idea: the NumPy twin's mirrors, the fast package's twins of
    the plain modules they speed up, each layer's checks and configs, a command-line module named after what its
    command runs, an attention and its cache, and a family's loader (``pretrained/<family>.py``) named after its
    model (``models/modern/``)."""
    allowed = {"checks", "__init__", "config",
               "latent"}      # an attention (attention/) and its cache (models/caches/)
    twins = {"softmax", "masks", "math_attention", "chunked", "sdpa", "multihead", "positional", "layernorm",
             "feedforward", "block", "encoder", "linear"}
    by_name = defaultdict(list)
    for module in MODULES:
        by_name[module.rsplit(".", 1)[-1]].append(module)

    def originals(name: str, mods: list[str]) -> list[str]:
        """The modules of one name that are not the twin of another: at most one may remain."""
        return [m for m in mods if not (m.startswith("attnlab.numpy.") and name in twins)
                and not m.startswith(("attnlab.fast.", "attnlab.cli."))
                and not (m == f"attnlab.pretrained.{name}" and f"attnlab.models.modern.{name}" in mods)]

    clashes = {name: mods for name, mods in by_name.items()
               if len(mods) > 1 and name not in allowed and len(originals(name, mods)) > 1}
    assert not clashes, clashes


def test_models_holds_at_most_twelve_modules_at_its_top_each_in_the_layout_table():
    """``models/`` by model: its modules and sub-packages (``__init__`` aside) at most 12, and docs/layout.md's table
    of ``models/`` (and its Chinese twin) names exactly those."""
    models = SRC / "attnlab" / "models"
    top = {p.name + ("/" if p.is_dir() else "") for p in models.iterdir()
           if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()}
    assert len(top) <= 12, sorted(top)
    docs = SRC.parent / "docs"
    for doc in ("layout.md", "zh/layout.md"):
        text = (docs / doc).read_text(encoding="utf-8").split("## ", 2)[1]  # the section on models/
        rows = {line.split("`")[1] for line in text.splitlines() if line.startswith("| `")}
        assert rows == top, (doc, sorted(rows ^ top))
