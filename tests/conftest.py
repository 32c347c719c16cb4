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


@pytest.fixture(scope="session")
def dates_run(tmp_path_factory):
    """A translation model trained for a few seconds on the dates task (its translations are poor; the views
    and commands only need a real checkpoint): ``(out_dir, model, vocab)``."""
    from attnlab.models import load_trained
    from attnlab.training.config import Seq2SeqTrainConfig
    from attnlab.training.seq2seq_trainer import train_seq2seq

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = tmp_path_factory.mktemp("dates") / "run"
        model = {"d_model": 32, "num_heads": 2, "num_encoder_layers": 1, "num_decoder_layers": 2, "d_ff": 64,
                 "context_length": 40, "dropout": 0.0}
        train_seq2seq(Seq2SeqTrainConfig(task="dates", out=str(out), model=model, max_iters=30, batch_size=16,
                                         eval_interval=30, eval_iters=1, train_pairs=500, val_pairs=20,
                                         learning_rate=3e-3, warmup_iters=5, seed=3), quiet=True)
    finally:
        torch.set_num_threads(before)
    model, vocab = load_trained(out, kind="seq2seq")
    return out, model, vocab


@pytest.fixture
def small_dates_demo(monkeypatch):
    """The demo's dates part at toy size: 6 steps of a 32-wide model, a checkpoint at 3 and 6 (both shown), 10 more
    held-out days."""
    import attnlab.demo.dates as dates

    small = dict(dates.DATES_DEMO, model=dict(dates.DATES_DEMO["model"], d_model=32, d_ff=64), max_iters=6,
                 eval_interval=3, eval_iters=1, train_pairs=300, val_pairs=10, warmup_iters=2)
    monkeypatch.setattr(dates, "DATES_DEMO", small)
    monkeypatch.setattr(dates, "EARLY_STEPS", (3,))
    monkeypatch.setattr(dates, "HELD_OUT", 10)


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, driven by Playwright (tests/browsers.py finds it); the test skips without either."""
    from browsers import ARGS, chromium_path

    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")
    path = chromium_path()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=ARGS)
        yield b
        b.close()
