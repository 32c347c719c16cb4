import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every training test runs on one thread (see the root conftest)."""


@pytest.fixture
def tiny_config(corpus, tmp_path):
    """A run that takes about a second: the tiny preset with a 16-token block."""
    from attnlab.training import TrainConfig

    def make(**overrides):
        values = dict(data=str(corpus), out=str(tmp_path / "run"), preset="tiny", model={"context_length": 16},
                      max_iters=12, batch_size=4, eval_interval=4, eval_iters=2, warmup_iters=2, seed=7)
        return TrainConfig(**{**values, **overrides})

    return make
