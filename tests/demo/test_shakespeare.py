import io

from rich.console import Console

import attnlab.demo.shakespeare as shakespeare
from attnlab.demo import STEPS, Demo
from attnlab.demo.toy import toy_step


def test_the_demo_runs_the_training_steps_before_the_report():
    names = [s.__name__ for s in STEPS]
    assert names.index("mechanisms_step") < names.index("toy_step") < names.index("shakespeare_step")
    assert names.index("shakespeare_step") < names.index("report_step")  # the report shows the trained model


def test_toy_step_prints_the_losses_and_writes_heatmaps(tmp_path, one_thread):
    out = io.StringIO()
    toy_step(Demo(Console(file=out, width=120), 123, tmp_path))
    text = out.getvalue()
    assert text.count("epoch ") == 20 and "epoch 200" in text  # 10 lines per variant
    assert "masked 0.000, 0.000, 0.000, 0.000" in text
    assert list((tmp_path / "toy").glob("*.png"))


def test_shakespeare_step_trains_draws_and_samples(tmp_path, monkeypatch, corpus, one_thread):
    small = dict(shakespeare.SHAKESPEARE_DEMO, data=str(corpus), preset="tiny", max_iters=6, eval_interval=3,
                 eval_iters=1, warmup_iters=1)
    monkeypatch.setattr(shakespeare, "SHAKESPEARE_DEMO", small)
    monkeypatch.setattr(shakespeare, "SAMPLE_TOKENS", 20)
    out = io.StringIO()
    for _ in range(2):  # a second demo run replaces the first run's checkpoints
        shakespeare.shakespeare_step(Demo(Console(file=out, width=120), 123, tmp_path))
    text = out.getvalue()
    assert "6 steps" in text and "A sample" in text
    assert (tmp_path / "shakespeare" / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
