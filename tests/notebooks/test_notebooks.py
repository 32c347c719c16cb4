"""The notebooks in ``notebooks/``: every Chinese notebook has an English twin with the same code, each ends with an
exercise whose hidden cell checks the answer, and all of them run from top to bottom.

Execution: jupytext reads each percent-format source and nbclient runs it in a fresh IPython kernel. The kernel is
this very interpreter (``sys.executable``: the venv's Python under ``make test``); its kernelspec is written to a
temporary directory, so no installed kernel is used or needed, and a ``python3`` kernel registered elsewhere
cannot stand in for it. Kernels run side by side (one per core, at most 4; ``ATTNLAB_NOTEBOOK_WORKERS`` overrides),
each with one thread, and talk to the test over Unix sockets (no TCP ports to race for).

The twin invariant: the same cells in the same order (cell types, tags, hidden inputs), and in every code cell the
same code token for token; only comments and the Markdown prose may differ. So both languages compute, print and
check exactly the same things.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext", reason="the notebooks need jupytext: pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
LANGS = ("zh", "en")
# the subject in the texts' order
NAMES = [
    "01_simplified_self_attention",
    "02_trainable_qkv",
    "03_causal_mask_dropout",
    "04_multi_head",
    "05_positions_layernorm_block",
    "06_encoder_bert",
    "07_train_gpt",
    "08_numpy_twin",
    "09_what_heads_learn",
    "10_attention_today",
    "11_explore_live",
]
SOURCES = [NOTEBOOKS / lang / f"{name}.py" for name in NAMES for lang in LANGS]

# A plausible mistake per exercise (the classic one where there is one): the hidden check must reject it.
WRONG_ANSWERS = {
    "01": "answer = (inputs @ inputs[5]) @ inputs  # no softmax",
    "02": "answer = torch.softmax(cap.keys[0][0] @ cap.queries[0][0, 2], dim=0)  # not scaled by 1/sqrt(d_k)",
    "03": "answer = weights_causal  # the padded keys not masked",
    "04": "answer = weights_mha[0, 0]  # head 0, not head 1",
    "05": "answer = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5)  # unbiased",
    "06": "answer = torch.nn.functional.normalize(hidden.mean(dim=1), dim=-1)  # the padding averaged in",
    "07": "answer = generate(model, encode_prompt(tokenizer, '白日'), 9, GenerationConfig(temperature=0))  # one short",
    "08": "answer = 2 * 2 * 1 * 8 * 1024 * 1024 * 64  # every pair, not only the causal ones",
    "09": "answer = weights[:, torch.arange(half, 2 * half), torch.arange(half)].mean(dim=-1)  # the occurrence itself",
    "10": "answer = 32 * 32768 * 8 * 128 * 2  # the keys alone: the values forgotten",
    "11": "answer = widget.ask('forward', {'text': sentence, 'head_mask': [[3, 0]]})['baseline']"
          "['embedding_similarity']  # layer and head swapped",
}
# The texts' terms: in a Chinese notebook the first use of each is followed by its English term in brackets.
GLOSSARY = {
    "自注意力": "self-attention",
    "词元": "token",
    "嵌入": "embedding",
    "注意力分数": "attention score",
    "注意力权重": "attention weight",
    "上下文向量": "context vector",
    "查询": "query",
    "缩放点积注意力": "scaled dot-product attention",
    "因果注意力": "causal attention",
    "掩码": "mask",
    "填充": "padding",
    "暂退法": "dropout",
    "多头注意力": "multi-head attention",
    "位置编码": "positional encoding",
    "层归一化": "layer normalization",
    "前馈网络": "feed-forward",
    "残差连接": "residual connection",
    "编码器": "encoder",
    "交叉熵": "cross-entropy",
    "贪心解码": "greedy decoding",
    "浮点运算次数": "FLOPs",
}
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def read(path: Path):
    return jupytext.read(path)


def tags(cell) -> set[str]:
    return set(cell.metadata.get("tags", []))


def hidden(cell) -> bool:
    return bool(cell.metadata.get("jupyter", {}).get("source_hidden"))


def code_tokens(source: str) -> list[tuple[int, str]]:
    """The code as tokens, comments and blank lines left out (twins comment in their own language)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith("%")]  # IPython magics
    stream = tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline)
    return [(t.type, t.string) for t in stream if t.type not in (tokenize.COMMENT, tokenize.NL)]


def markdown(nb) -> str:
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def without_code(text: str) -> str:
    """Prose only: fenced blocks and inline code spans removed."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


# ---- the sources -----------------------------------------------------------------------------------------------

def test_every_notebook_has_both_languages_and_nothing_else():
    for lang in LANGS:
        found = sorted(p.stem for p in (NOTEBOOKS / lang).glob("*.py"))
        assert found == NAMES, f"notebooks/{lang}: expected {NAMES}, found {found}"


@pytest.mark.parametrize("name", NAMES)
def test_twins_have_the_same_cells_and_code(name):
    zh, en = (read(NOTEBOOKS / lang / f"{name}.py") for lang in LANGS)
    shape = [[(c.cell_type, sorted(tags(c)), hidden(c)) for c in nb.cells] for nb in (zh, en)]
    assert shape[0] == shape[1], f"{name}: zh and en differ in their cells (type, tags, hidden)"
    for i, (a, b) in enumerate(zip(zh.cells, en.cells, strict=True)):
        if a.cell_type == "code":
            assert code_tokens(a.source) == code_tokens(b.source), f"{name}: code cell {i} differs beyond comments"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_ends_with_an_exercise_and_its_hidden_check(path):
    cells = read(path).cells
    *_, solution, check = cells
    heading = "练习" if path.parent.name == "zh" else "Exercise"
    assert any(c.cell_type == "markdown" and c.source.startswith(f"## {heading}") for c in cells[-4:]), \
        f"{path.name}: the exercise must be introduced by a '## {heading}' heading just before its cells"
    assert solution.cell_type == "code" and tags(solution) == {"solution", "hide-input"} and hidden(solution)
    assert re.search(r"^answer = ", solution.source, flags=re.M), f"{path.name}: the solution must set `answer`"
    assert check.cell_type == "code" and tags(check) == {"check", "remove-input"} and hidden(check)
    assert "assert " in check.source and "answer" in check.source
    assert [tags(c) & {"solution", "check"} for c in cells].count({"check"}) == 1
    assert [tags(c) & {"solution", "check"} for c in cells].count({"solution"}) == 1


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_sources_are_canonical_percent_format(path):
    # jupytext writes back exactly what is committed, so converting never produces a spurious diff
    assert jupytext.writes(read(path), fmt="py:percent") == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", NAMES)
def test_chinese_prose_is_chinese_and_english_prose_is_english(name):
    zh, en = (read(NOTEBOOKS / lang / f"{name}.py") for lang in LANGS)
    for i, cell in enumerate(zh.cells):
        if cell.cell_type == "markdown":
            assert CJK.search(cell.source), f"zh/{name}: markdown cell {i} has no Chinese"
    for i, cell in enumerate(en.cells):
        if cell.cell_type == "markdown":
            stray = CJK.findall(without_code(cell.source))
            assert not stray, f"en/{name}: markdown cell {i} has Chinese outside `code`: {''.join(stray)}"


@pytest.mark.parametrize("name", NAMES)
def test_chinese_terms_carry_the_english_term_on_first_use(name):
    text = markdown(read(NOTEBOOKS / "zh" / f"{name}.py"))
    used = 0
    for term, english in GLOSSARY.items():
        at = text.find(term)
        if at < 0:
            continue
        used += 1
        after = re.match(r"[（(]([^）)]*)[）)]", text[at + len(term):])
        assert after and english.lower() in after.group(1).lower(), \
            f"zh/{name}: the first {term!r} must be followed by （{english}…）, got {text[at:at + 40]!r}"
    assert used >= 3


def test_readme_links_every_notebook():
    readme = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    for path in SOURCES:
        assert f"({path.parent.name}/{path.name})" in readme, f"notebooks/README.md does not link {path.name}"
    assert "jupytext --to ipynb" in readme


def test_the_wrong_answers_are_wrong_for_every_exercise():
    assert sorted(WRONG_ANSWERS) == [n[:2] for n in NAMES]


# ---- running them ----------------------------------------------------------------------------------------------



@dataclass
class Run:
    """What executing one notebook gave: its outputs, and what the hidden check made of a wrong answer."""

    path: Path
    nb: object = None
    error: str | None = None
    seconds: float = 0.0
    executable: str = ""
    probes: dict[str, str | None] = field(default_factory=dict)  # probe -> the error it raised (None: none)


def workers() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return int(os.environ.get("ATTNLAB_NOTEBOOK_WORKERS", 0)) or max(1, min(4, cores))


def write_kernelspec(root: Path) -> str:
    """A kernelspec for this interpreter; returns its name."""
    name = "attnlab-tests"
    spec = root / "kernels" / name
    spec.mkdir(parents=True)
    argv = [sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (root / "tmp").mkdir()
    # one thread each (kernels run side by side); IPython's and the notebooks' own files inside root, removed after
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "IPYTHONDIR": str(root / "ipython"),
           "TMPDIR": str(root / "tmp")}
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "attnlab tests",
                                                  "language": "python", "env": env}), encoding="utf-8")
    return name


async def execute(run: Run, root: Path, kernel: str, gate: asyncio.Semaphore) -> None:
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from nbformat.v4 import new_code_cell

    nb = read(run.path)
    work = Path(tempfile.mkdtemp(prefix=f"{run.path.stem[:2]}{run.path.parent.name}-", dir=root))
    async with gate:
        start = time.perf_counter()
        specs = KernelSpecManager(kernel_dirs=[str(root / "kernels")])
        sockets = {"transport": "ipc", "ip": str(work / "ipc")} if os.name == "posix" else {}  # else TCP
        km = AsyncKernelManager(kernel_name=kernel, kernel_spec_manager=specs,
                                connection_file=str(work / "kernel.json"), **sockets)
        # no limit per cell: a cell takes what this machine needs (the suite's timeout is the one net under a hang)
        client = NotebookClient(nb, km=km, timeout=None, shutdown_kernel="immediate",
                                resources={"metadata": {"path": str(work)}})

        async def cell(index: int) -> str | None:
            try:
                await client.async_execute_cell(nb.cells[index], index)
            except CellExecutionError as err:
                return f"{err.ename}: {err.evalue}"
            return None

        async def probe(source: str) -> str | None:
            nb.cells.append(new_code_cell(source))
            return await cell(len(nb.cells) - 1)

        async with client.async_setup_kernel(cleanup_kc=True):  # we made km: stop it too
            own = len(nb.cells)
            for index in range(own):
                run.error = await cell(index)
                if run.error:
                    run.error = f"cell {index}: {run.error}"
                    break
            if run.error is None:
                check = nb.cells[own - 1].source
                await probe("import sys\nprint(sys.executable)")
                run.executable = "".join(o.get("text", "") for o in nb.cells[-1].outputs).strip()
                run.probes["wrong"] = await probe(WRONG_ANSWERS[run.path.stem[:2]] + "\n" + check)
                run.probes["missing"] = await probe("del answer\n" + check)
            del nb.cells[own:]
        run.nb, run.seconds = nb, time.perf_counter() - start


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> dict[Path, Run]:
    """Every notebook, executed once per test session, ``workers()`` at a time."""
    pytest.importorskip("nbclient", reason="running the notebooks needs nbclient: pip install -e '.[dev]'")
    pytest.importorskip("ipykernel", reason="running the notebooks needs ipykernel: pip install -e '.[dev]'")
    # Unix socket paths must stay short (~100 bytes): a short directory of our own, removed afterwards
    root = Path(tempfile.mkdtemp(prefix="attnlab-nb-"))
    kernel = write_kernelspec(root)
    results = {p: Run(p) for p in SOURCES}

    async def all_of_them():
        gate = asyncio.Semaphore(workers())
        await asyncio.gather(*(execute(r, root, kernel, gate) for r in results.values()))

    start = time.perf_counter()
    asyncio.run(all_of_them())
    total = time.perf_counter() - start
    print(f"\n{len(results)} notebooks in {total:.1f} s with {workers()} kernels at a time: "
          + ", ".join(f"{p.parent.name}/{p.stem[:2]} {r.seconds:.1f} s" for p, r in results.items()))
    yield results
    import shutil

    shutil.rmtree(root, ignore_errors=True)


def outputs(nb, kind: str) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if kind in o.get("data", {})]


@pytest.mark.slow
@pytest.mark.parametrize("path", SOURCES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_notebook_runs_and_its_check_rejects_a_wrong_answer(path, runs):
    run = runs[path]
    assert run.error is None, f"{path.parent.name}/{path.name} failed at {run.error}"
    assert Path(run.executable) == Path(sys.executable), "the kernel must be the interpreter running the tests"
    assert outputs(run.nb, "image/png"), f"{path.name} showed no figure"
    check = run.nb.cells[-1]
    assert "✓" in "".join(o.get("text", "") for o in check.outputs), f"{path.name}: the check printed no ✓"
    assert run.probes["wrong"] is not None and run.probes["wrong"].startswith("AssertionError"), \
        f"{path.name}: the hidden check accepted a wrong answer ({run.probes['wrong']})"
    assert run.probes["missing"] is not None and run.probes["missing"].startswith("NameError"), \
        f"{path.name}: the hidden check ran without an answer ({run.probes['missing']})"
