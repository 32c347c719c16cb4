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
    assert "6 steps, val loss" in text and "A sample" in text and "nats a character" in text
    assert (tmp_path / "shakespeare" / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_trained_parts_train_a_fixed_number_of_steps():
    """No wall-clock budget: the same steps, hence the same model, on a fast machine and on a busy one."""
    from attnlab.demo.dates import DATES_DEMO

    for config in (shakespeare.SHAKESPEARE_DEMO, DATES_DEMO):
        assert config.get("time_budget") is None and config["max_iters"] >= 100


def test_the_demo_runs_on_one_thread_and_gives_the_count_back(tmp_path):
    import torch

    from attnlab.demo import run_demo

    seen = []
    before = torch.get_num_threads()
    run_demo(out_dir=tmp_path, console=Console(file=io.StringIO()),
             steps=[lambda demo: seen.append((torch.get_num_threads(), torch.is_grad_enabled()))])
    assert seen == [(1, False)] and torch.get_num_threads() == before


def test_the_sample_guide_reads_the_checkpoint():
    class Model:
        config = type("Config", (), {"context_length": 64})

        def num_parameters(self):
            return 811_776

    state = {"step": 3000, "train_config": {"batch_size": 12, "grad_accum": 1, "data": "shakespeare"},
             "history": {"eval": [(3000, 1.5, 1.75)]}}
    text = shakespeare.sample_guide(Model(), type("Tok", (), {"vocab_size": 80})(), state)
    # 3000 steps of 12 sequences of 64 characters; e^1.75 = 5.75
    assert "2,304,000 characters" in text and "811,776 parameters" in text and "about 5.8 characters" in text
    assert text.startswith("What to look for") and "among 80" in text
