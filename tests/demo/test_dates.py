import io

import pytest
from rich.console import Console

import attnlab.demo.dates as dates
from attnlab.data.tasks import DateItem, get_task
from attnlab.demo import STEPS, Demo
from attnlab.demo.report import trained_section, translation_section
from attnlab.generation.translation import Translation


def test_the_example_day_is_held_out_in_every_language():
    task = get_task("dates")
    assert all(task.is_held_out(DateItem(dates.DAY, loc, fmt)) for loc, fmt in dates.EXAMPLES)
    assert len({loc for loc, _ in dates.EXAMPLES}) == 7
    assert {p.target for p in dates.example_pairs()} == {dates.DAY.isoformat()}


def test_the_step_runs_after_the_gpt_and_before_the_report():
    names = [s.__name__ for s in STEPS]
    assert names.index("shakespeare_step") < names.index("translation_step") < names.index("report_step")


def test_translation_step_trains_translates_and_draws(tmp_path, small_dates_demo, one_thread):
    runs = []
    for _ in range(2):  # a second demo run replaces the first run's checkpoints, and prints the same
        out = io.StringIO()
        dates.translation_step(Demo(Console(file=out, width=200), 123, tmp_path))
        runs.append(out.getvalue())
    text = runs[0]
    assert "6 steps, val loss" in text and "after 3 steps" in text and "after 6 steps" in text
    assert all(pair.source in text for pair in dates.example_pairs())
    assert text.count("after 3 steps: ") == text.count("after 6 steps: ") == 1 and "What a ✗ means" in text
    assert [without_speed(r) for r in runs[1:]] == [without_speed(runs[0])]  # the same steps, the same answers
    assert (tmp_path / "dates" / "alignment.png").read_bytes()[:4] == b"\x89PNG"
    section = translation_section(tmp_path)
    assert section is not None and "5. Translation" in section.title
    assert section.body.count("<tr>") == 1 + 7 and "15 juillet 2031" in section.body
    assert section.body.count("<li>after ") == 2 and "What a ✗ means" in section.body
    assert trained_section(tmp_path) is None  # a translation model is not the GPT the report samples from


def without_speed(text: str) -> str:
    """The demo's output less what depends on the machine's speed (tokens/s, the progress bar's times)."""
    return "\n".join(line for line in text.splitlines() if "tokens/s" not in line and "tok/s" not in line)


@pytest.mark.parametrize(("got", "wrong", "shown"), [
    ("2031-07-15", [], "✓"),
    ("2013-07-15", ["year"], "✗ year"),                  # the year's digits in the wrong order
    ("2051-05-13", ["year", "month", "day"], "✗ year, month, and day"),
    ("2031-07-12", ["day"], "✗ day"),
    ("2050-011-1", None, "✗ not a date"),                # the malformed answer of an undertrained model
    ("", None, "✗ not a date"),
])
def test_what_is_wrong_with_a_date(got, wrong, shown):
    assert dates.wrong_fields(got, "2031-07-15") == wrong
    assert dates.verdict(got, "2031-07-15") == shown


def test_a_snapshot_says_what_it_gets_wrong():
    pairs = dates.example_pairs()
    answers = ["2013-07-12", "2013-07-15", "2031-07-15", "2031-05-15", "2031-07-15", "20-7", "2031-07-15"]
    shot = dates.Snapshot(150, [Translation(p.source, a, []) for p, a in zip(pairs, answers, strict=True)], 0.14)
    assert shot.right(pairs) == 3
    assert shot.summary(pairs) == ("after 150 steps: 3/7 right (2 with the year wrong, 1 with the month wrong, 1 with "
                                   "the day wrong, and 1 not a date at all); 14% of 200 other held-out days")


def test_what_is_wrong_is_listed_in_the_readers_language():
    from attnlab.i18n import set_language

    set_language("zh")
    assert dates.verdict("2051-05-13", "2031-07-15") == "✗ 年份、月份和日"
    assert dates.verdict("2031-07-12", "2031-07-15") == "✗ 日"
