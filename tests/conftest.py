import os

import pytest
import torch
from hypothesis import HealthCheck, settings

# backend='flash' runs Triton kernels; without a GPU, Triton's interpreter runs them on the CPU. Triton reads this
# when a kernel is decorated, so it is set here, before any test imports attnlab.functional.flash.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Property tests: no per-example deadline (a shared 2-core machine is noisy), a modest number of cases.
settings.register_profile(
    "attnlab", deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "attnlab"))


@pytest.fixture(autouse=True)
def _english(monkeypatch):
    """Messages in English whatever the machine's locale (tests of the Chinese ones ask for it)."""
    from attnlab.i18n import set_language

    monkeypatch.setenv("ATTNLAB_LANG", "en")
    yield
    set_language(None)


@pytest.fixture(autouse=True)
def _seed():
    import torch

    torch.manual_seed(0)


@pytest.fixture
def one_thread():
    """One torch thread: on a busy shared machine, two OpenMP threads spin and run many times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def corpus(tmp_path):
    """A small training text, as a file."""
    from corpora import TEXT

    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path
