"""Every command in Chinese all the way through: what it prints, every text of the figures it draws, the page it
writes and its help hold no English word of attnlab's own. What stays as it is, in either language, is data and
names: the text given and its tokens, file names, numbers and units, model and family names, the names of the lists
attnlab's options choose from (backends, presets, tasks, ...), code names (``W_q``, ``max_iters``) and the
symbols of the arithmetic (softmax, exp). An English word anywhere else is a message someone forgot to mark or to
translate, and this test names it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from matplotlib.figure import Figure
from matplotlib.text import Text

from attnlab.cli import main

#: names and symbols that are the same in every language
NAMES = {
    "attnlab", "GPT", "BERT", "MiniLM", "all-MiniLM-L6-v2", "Transformer", "Adam", "AdamW", "MSE", "ISO", "UTF-8",
    "JSON", "HTML", "PNG", "SVG", "TSV", "TOML", "CPU", "GPU", "CUDA", "GFLOP", "GB", "GiB", "MiB", "ms", "fp32",
    "bf16", "fp16", "int8", "int4", "L2", "softmax", "exp", "max", "sin", "cos", "PE", "pos", "CLS", "SEP", "UNK",
    "PAD", "bos", "eos", "pad", "torch", "torchrun", "numpy", "NumPy", "networkx", "transformers", "Hugging", "Face",
    "Llama", "Qwen2", "Qwen3", "Mistral", "Gemma", "Phi-3", "GPT-2", "MiniLM-L6-v2", "RoPE", "RMSNorm", "SwiGLU",
    "LayerNorm", "StreamingLLM", "Triton", "FSDP2", "Abnar", "Zuidema", "Olsson", "Clark", "Michel", "Bahdanau",
    "Shakespeare", "Hamlet", "ROMEO", "pre-LN", "post-LN", "DecompressionStream", "safetensors", "ICL", "KV", "CJK",
    "TAB", "argmax", "alpha", "random", "bert", "shakespeare", "cpu", "cuda", "dtype", "autocast", "dropout",
    "logit", "logits", "top-k", "top-p", "MHA", "GQA", "MQA", "MLA", "DSA", "float32", "bfloat16", "DeltaNet",
    "Qwen3-Next", "Qwen3.5", "DeepSeek", "DeepSeek-V2", "DeepSeek-V3", "DiffLlama", "SmolLM3", "MoE",
    "Kimi-Linear", "KDA",
}
TITLES = ("Attention Is All You Need",)  # papers, by their titles


def _lists() -> set[str]:
    """The names options choose from: every choice of every option (``--mode encoder``), the commands, and the lists
    of docs/layout.md that options name as text (backends, presets); and click's metavars."""
    import click

    from attnlab.bench.cases import NUMPY_BACKENDS
    from attnlab.functional.backends import BACKENDS
    from attnlab.models.registry import ARCHITECTURES

    choices = {c for path in _leaves() for param in _command(path).params if isinstance(param.type, click.Choice)
               for c in param.type.choices}
    presets = {p for arch in ARCHITECTURES.values() for p in arch.presets}
    return {*choices, *(name for path in _leaves() for name in path), *BACKENDS, *NUMPY_BACKENDS, *presets,
            *ARCHITECTURES, "TEXT", "TEXTS", "INTEGER", "FLOAT", "RANGE", "FILE", "DIRECTORY", "PATH", "NAME",
            "OPTIONS", "COMMAND", "ARGS", "PART", "PROMPT", "PROMPTS", "DIR", "LANG", "ATTNLAB_LANG"}


def _command(path: tuple[str, ...]):
    cmd = main
    for name in path:
        cmd = cmd.get_command(None, name)
    return cmd


def english_words(text: str, data: set[str]) -> set[str]:
    """The English words of ``text`` that are neither ``data`` nor a name (see the module)."""
    for title in TITLES:
        text = text.replace(title, " ")
    text = re.sub(r"\$[^$]*\$", " ", text)  # matplotlib's math text: the log axes' ticks
    text = re.sub(r"\S*/\S*|\S*\.(?:png|svg|html|json|md|safetensors|txt|tsv|toml|py)\b", " ", text)  # paths
    text = re.sub(r"[\w-]+(?:\.[\w-]+)+", " ", text)  # code and versions: torch.compile, qwen2.5-0.5b
    text = re.sub(r"\d+(?:\.\d+)?e[-+]?\d+", " ", text)  # 1.5e-08
    text = re.sub(r"(?<![\w-])--?[a-z][\w-]*", " ", text)  # options: --max-iters, -o
    words = re.findall(r"[A-Za-z][A-Za-z0-9_]*(?:[-'][A-Za-z0-9_]+)*", text)
    allowed = NAMES | _lists() | data
    return {w for w in words if len(w) > 1 and "_" not in w and w not in allowed and w.lower() not in allowed}


def _data_words(*texts: str) -> set[str]:
    return {w for t in texts for w in re.findall(r"[A-Za-z0-9]+", t)} | {w.lower() for t in texts
                                                                        for w in re.findall(r"[A-Za-z]+", t)}


SENTENCES = "The cat sat on the mat.\nA dog ran in the park today.\n"


def commands(d: Path, out: Path) -> dict[str, list[str]]:
    """Every command that prints, draws or writes, each at a size that runs in seconds (``d``: tests/bad_inputs's
    folder, holding a tiny trained run of each kind)."""
    tiny = ["--preset", "tiny", "--context-length", "16", "--batch-size", "2", "--eval-interval", "2", "--eval-iters",
            "1", "--max-iters", "4"]
    s2s = ["--d-model", "16", "--num-heads", "2", "--num-encoder-layers", "1", "--num-decoder-layers", "1", "--d-ff",
           "32", "--context-length", "24", "--batch-size", "4", "--steps", "2", "--eval-interval", "2", "--eval-iters",
           "1", "--train-pairs", "50", "--val-pairs", "10"]
    return {
        "explain": ["explain", "我 爱 学习 AI"],
        "explain-trained": ["explain", "First", "--model", f"{d}/run"],
        "explain-translation": ["explain", "12", "--checkpoint", f"{d}/s2s"],
        "heatmap": ["heatmap", "我 爱 学习 AI", "--all-heads", "-o", f"{out}/h.png"],
        "view": ["view", "我 爱 学习 AI", "-o", f"{out}/v.html"],
        "view-translation": ["view", "12", "--checkpoint", f"{d}/s2s", "-o", f"{out}/vs.html"],
        "pe-plot": ["pe-plot", "-o", f"{out}/pe.png"],
        "heads-rollout": ["heads", "rollout", "我 爱 学习 人工智能", "--model", "bert", "-o", f"{out}/r.png"],
        "heads-induction": ["heads", "induction", "--steps", "10", "--out", f"{out}/induction"],
        "heads-roles": ["heads", "roles", "--text", f"{out}/sentences.txt", "--out", f"{out}/roles"],
        "heads-prune": ["heads", "prune", "--checkpoint", f"{d}/run", "--batches", "1", "--batch-size", "2", "--out",
                        f"{out}/prune"],
        "bench": ["bench", "--quick", "--seq-lens", "16", "--d-model", "32", "--heads", "2", "--no-texts-shape",
                  "--backends", "math,numpy-math", "--out", f"{out}/bench"],
        "train": ["train", "--data", f"{d}/corpus.txt", "--out", f"{out}/train", *tiny],
        "train-seq2seq": ["train-seq2seq", "--task", "numbers", "--out", f"{out}/s2s", *s2s],
        "sample": ["sample", "--checkpoint", f"{d}/run", "First", "--max-new-tokens", "20"],
        "translate": ["translate", "--checkpoint", f"{d}/s2s", "12", "--heatmap", f"{out}/t.png"],
        "export": ["export", "--checkpoint", f"{d}/run", "--out", f"{out}/m.safetensors"],
        "demo-toy": ["demo", "toy", "--out", f"{out}/demo"],
    }


def _page_text(page: str) -> str:
    """What a page shows: its text (no style, no script) and what its script says (``ui``)."""
    found = re.search(r'<script type="application/json" id="attnlab-data">(.*?)</script>', page, re.S)
    said = " ".join(json.loads(found.group(1)).get("ui", {}).values()) if found else ""
    said = re.sub(r"\{\w+\}", " ", said)  # the fields the script fills in
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"<[^>]+>", " ", body) + " " + said


@pytest.fixture(scope="module")
def figures_drawn():
    """Every text of every figure saved while the test runs (titles, axes, legends, colour bars, ticks)."""
    drawn: list[str] = []
    save = Figure.savefig

    def recording(fig, *args, **kwargs):
        drawn.extend(t.get_text() for t in fig.findobj(Text) if t.get_text())
        return save(fig, *args, **kwargs)

    Figure.savefig = recording
    yield drawn
    Figure.savefig = save


@pytest.mark.slow
@pytest.mark.parametrize("name", list(commands(Path("d"), Path("o"))))
def test_every_command_is_chinese_all_the_way_through(bad_dir, tmp_path, figures_drawn, one_thread, name):
    (tmp_path / "sentences.txt").write_text(SENTENCES, encoding="utf-8")
    argv = commands(bad_dir, tmp_path)[name]
    figures_drawn.clear()
    result = CliRunner().invoke(main, ["--lang", "zh", *argv], prog_name="attnlab")
    assert result.exit_code == 0, result.output
    said = result.stderr if name == "sample" else result.output  # what sample prints is the model's text: data
    pages = [_page_text(p.read_text(encoding="utf-8")) for p in tmp_path.rglob("*.html")]
    data = _data_words(*argv, SENTENCES, "run s2s First")
    left = {where: sorted(english_words(text, data)) for where, text in
            [("output", said), ("figures", "\n".join(figures_drawn)), ("pages", "\n".join(pages))]}
    assert left == {"output": [], "figures": [], "pages": []}
    assert name not in ("view", "view-translation") or pages, "the page was not found"
    assert re.search(r"[\u4e00-\u9fff]", said + "".join(figures_drawn))  # it did say something, in Chinese


def _leaves(group=main, prefix=()) -> list[tuple[str, ...]]:
    import click

    found = [prefix]
    for name in group.list_commands(None):
        cmd = group.get_command(None, name)
        found += _leaves(cmd, (*prefix, name)) if isinstance(cmd, click.Group) else [(*prefix, name)]
    return found


@pytest.mark.parametrize("command", _leaves(), ids=lambda c: " ".join(c) or "attnlab")
def test_every_help_is_chinese_all_the_way_through(command):
    text = CliRunner().invoke(main, ["--lang", "zh", *command, "--help"], prog_name="attnlab").output
    prose = "\n".join(line for line in text.splitlines()
                      if not line.strip().startswith(("attnlab ", "torchrun ")))  # the examples, as typed
    prose = re.sub(r"\[默认：[^\]]*\]", " ", prose)  # defaults are values
    prose = re.sub(r"“[^”]*”", " ", prose)  # a quoted example input is data (“15 juillet 2031”)
    assert english_words(prose, set()) == set()


def test_an_english_word_left_is_found():
    """The control: the check finds a message left in English, and lets data, names and paths through."""
    assert english_words("第 0 层 attention weight", set()) == {"attention", "weight"}
    assert english_words("写入 /tmp/x/h.png；softmax a_j GPT --max-iters 1.5e-08", set()) == set()
    assert english_words("'cat' 的注意力", {"cat"}) == set()
