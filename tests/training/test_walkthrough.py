import io

from rich.console import Console

import attnlab.training.walkthrough as walkthrough
from attnlab.demo import EMBEDDINGS, STEPS


def test_the_demo_runs_the_training_steps_before_the_report():
    names = [s.__name__ for s in STEPS]
    assert names.index("mechanisms") < names.index("toy_step") < names.index("shakespeare_step")
    if "report_step" in names:  # the report shows the trained model, so it must come after the training
        assert names.index("shakespeare_step") < names.index("report_step")


def test_toy_step_prints_the_losses_and_writes_heatmaps(tmp_path):
    out = io.StringIO()
    walkthrough.toy_step(Console(file=out, width=120), EMBEDDINGS, 123, str(tmp_path))
    text = out.getvalue()
    assert text.count("epoch ") == 20 and "epoch 200" in text  # 10 lines per variant
    assert "masked 0.000, 0.000, 0.000, 0.000" in text
    assert list((tmp_path / "toy").glob("*.png"))


def test_shakespeare_step_trains_and_samples(tmp_path, monkeypatch, corpus):
    small = dict(walkthrough.SHAKESPEARE_DEMO, data=str(corpus), preset="tiny", max_iters=6, eval_interval=3,
                 eval_iters=1, warmup_iters=1)
    monkeypatch.setattr(walkthrough, "SHAKESPEARE_DEMO", small)
    monkeypatch.setattr(walkthrough, "SAMPLE_TOKENS", 20)
    out = io.StringIO()
    for _ in range(2):  # a second demo run replaces the first run's checkpoints
        walkthrough.shakespeare_step(Console(file=out, width=120), EMBEDDINGS, 123, str(tmp_path))
    text = out.getvalue()
    assert "6 steps" in text and "A sample" in text
    assert (tmp_path / "shakespeare" / "loss.png").exists()
