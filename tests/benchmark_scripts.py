"""A script of ``benchmarks/`` loaded as a module, for the tests of its bookkeeping."""

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@contextlib.contextmanager
def benchmark_script(name: str) -> Iterator[ModuleType]:
    """``benchmarks/{name}.py`` as the module ``name``, in ``sys.modules`` while in use (a dataclass looks its
    module up there)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]
