"""The book's path is plain PyTorch: nothing in the modules a learner reads asks which machine it runs on.

No tensor version stamps, data pointers, ``torch._C``, private torch ops or modules, CPU-capability checks or C++ in
``attention/``, ``layers/``, ``models/`` or the textbook kernel (``functional/math_attention.py``): all of that lives in
``attnlab.fast``, applied to the plain modules by ``accelerate``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "attnlab"
PLAIN = sorted([*(SRC / "attention").rglob("*.py"), *(SRC / "layers").rglob("*.py"), *(SRC / "models").rglob("*.py"),
                SRC / "functional" / "math_attention.py"])
#: what asks the machine, or reaches into torch's private parts
FORBIDDEN = {
    "a tensor's version stamp": re.compile(r"\._version\b"),
    "a data pointer": re.compile(r"\bdata_ptr\b"),
    "torch's C bindings": re.compile(r"\btorch\._C\b"),
    "a private torch module": re.compile(r"\btorch\._[a-z]"),
    "a torch op called by name": re.compile(r"\btorch\.ops\."),
    "a CPU-capability check": re.compile(r"get_cpu_capability|torch\.backends\.(cpu|mkldnn)"),
    "a hook dictionary": re.compile(r"\._(forward|backward)(_pre)?_hooks\b|_global_\w*hooks"),
    "C++": re.compile(r"\.cpp\b|cpp_extension|load_inline"),
    "the fast package": re.compile(r"attnlab\.fast\b"),
}
#: the one door from models/ into fast/: quantization swaps in fast/'s maps, and is an entry point of its own
ALLOWED = {("models/quantize.py", "the fast package")}


@pytest.mark.parametrize("path", PLAIN, ids=lambda p: str(p.relative_to(SRC)))
def test_the_plain_modules_ask_nothing_of_the_machine(path):
    text = path.read_text(encoding="utf-8")
    where = str(path.relative_to(SRC))
    found = [what for what, pattern in FORBIDDEN.items() if pattern.search(text) and (where, what) not in ALLOWED]
    assert not found, f"{where}: {found}"


def test_the_rule_catches_what_it_names():
    sample = "w._version, w.data_ptr(), torch._C._x, torch.ops.aten._mm, torch.backends.cpu.get_cpu_capability()"
    assert {what for what, pattern in FORBIDDEN.items() if pattern.search(sample)} >= {
        "a tensor's version stamp", "a data pointer", "torch's C bindings", "a torch op called by name",
        "a CPU-capability check"}
