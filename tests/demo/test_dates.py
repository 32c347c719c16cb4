import io

from rich.console import Console

import attnlab.demo.dates as dates
from attnlab.data.tasks import DateItem, get_task
from attnlab.demo import STEPS, Demo
from attnlab.demo.report import trained_section, translation_section


def test_the_example_day_is_held_out_in_every_language():
    task = get_task("dates")
    assert all(task.is_held_out(DateItem(dates.DAY, loc, fmt)) for loc, fmt in dates.EXAMPLES)
    assert len({loc for loc, _ in dates.EXAMPLES}) == 7
    assert {p.target for p in dates.example_pairs()} == {dates.DAY.isoformat()}


def test_the_step_runs_after_the_gpt_and_before_the_report():
    names = [s.__name__ for s in STEPS]
    assert names.index("shakespeare_step") < names.index("translation_step") < names.index("report_step")


def test_translation_step_trains_translates_and_draws(tmp_path, monkeypatch, one_thread):
    small = dict(dates.DATES_DEMO, model=dict(dates.DATES_DEMO["model"], d_model=32, d_ff=64),
                 max_iters=6, eval_interval=3, eval_iters=1, train_pairs=300, val_pairs=10, warmup_iters=2)
    monkeypatch.setattr(dates, "DATES_DEMO", small)
    out = io.StringIO()
    for _ in range(2):  # a second demo run replaces the first run's checkpoints
        dates.translation_step(Demo(Console(file=out, width=160), 123, tmp_path))
    text = out.getvalue()
    assert "6 steps" in text and text.count(" -> ") == 2 * 7
    assert (tmp_path / "dates" / "alignment.png").read_bytes()[:4] == b"\x89PNG"
    section = translation_section(tmp_path)
    assert section is not None and "5. Translation" in section.title
    assert section.body.count("<tr>") == 1 + 7 and "15 juillet 2031" in section.body
    assert trained_section(tmp_path) is None  # a translation model is not the GPT the report samples from
