import collections
import datetime as dt
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlab.data import TASKS, CharTokenizer, DatesTask, NumbersTask, Pair, get_task
from attnlab.data.tasks import DATE_FORMATS, DATE_LOCALES, FIRST_DAY, LAST_DAY, NUMBER_MAX, DateItem

babel_dates = pytest.importorskip("babel.dates")
cn2an = pytest.importorskip("cn2an")

DATES, NUMBERS = TASKS["dates"], TASKS["numbers"]


# ---------------------------------------------------------------- determinism and the split


def test_known_streams_for_seed_zero():
    # pinned: the same (n, seed) must give these pairs on any machine and Python version
    assert DATES(3, 0) == [Pair("12. März 2047", "2047-03-12"), Pair("Jan 28, 2064", "2064-01-28"),
                           Pair("Jul 11, 2064", "2064-07-11")]
    assert NUMBERS(3, 0) == [Pair("26", "二十六"), Pair("1550", "一千五百五十"), Pair("38803", "三万八千八百零三")]
    assert NUMBERS.held_out(2, 0) == [Pair("8746", "八千七百四十六"), Pair("77611", "七万七千六百一十一")]


@pytest.mark.parametrize("name", ["dates", "numbers"])
def test_same_seed_same_list_longer_extends_shorter(name):
    task = get_task(name)
    assert task(300, 7) == task(300, 7)
    assert task(500, 7)[:300] == task(300, 7)
    assert task(300, 8) != task(300, 7)
    assert task.held_out(50, 7) == task.held_out(50, 7) == task.held_out(80, 7)[:50]
    assert task(0, 7) == []


@pytest.mark.parametrize("name", ["dates", "numbers"])
def test_held_out_sources_never_in_training(name):
    task = get_task(name)
    trained = {p.source for seed in range(3) for p in task(3000, seed)}
    held = [p.source for seed in range(3) for p in task.held_out(300, seed)]
    assert trained.isdisjoint(held)
    assert len(set(task.held_out(1000, 0))) == 1000  # an evaluation set has no repeats
    assert not any(task.is_held_out(item) for item in task.train_items(2000, 1))
    assert all(task.is_held_out(item) for item in task.held_out_items(200, 1))


def test_dates_hold_out_ten_percent_of_days_in_every_style():
    days = [FIRST_DAY + dt.timedelta(days=i) for i in range((LAST_DAY - FIRST_DAY).days + 1)]
    held = [d for d in days if DATES.is_held_out(DateItem(d, "en_US", "long"))]
    assert 0.09 < len(held) / len(days) < 0.11
    # the split looks at the day only: a held-out day is held out in every locale and format
    styles = [(loc, fmt) for loc in DATE_LOCALES for fmt in DATE_FORMATS]
    assert all(DATES.is_held_out(DateItem(d, *style)) for d in held[:50] for style in styles)
    trained_days = {item.day for item in DATES.train_items(3000, 0)}
    assert trained_days.isdisjoint(item.day for item in DATES.held_out_items(300, 0))


def test_small_numbers_and_the_largest_are_never_held_out():
    assert not any(NUMBERS.is_held_out(x) for x in [*range(1000), NUMBER_MAX])
    held = sum(NUMBERS.is_held_out(x) for x in range(1000, 31000))
    assert 0.09 < held / 30000 < 0.11


def test_bad_arguments():
    with pytest.raises(ValueError, match="task must be one of 'dates', 'numbers', got 'dates2'"):
        get_task("dates2")
    with pytest.raises(ValueError, match="numbers: n must be an int >= 0, got -1"):
        NUMBERS(-1, 0)
    with pytest.raises(ValueError, match=r"dates.held_out: seed must be an int, got '0'"):
        DATES.held_out(3, "0")


@pytest.mark.parametrize(("module", "task"), [("babel.dates", DATES), ("cn2an", NUMBERS)])
def test_missing_optional_package_says_how_to_install(monkeypatch, module, task):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(ImportError, match=r"pip install 'attnlab\[seq2seq\]'"):
        task(1, 0)


@pytest.mark.parametrize("name", ["dates", "numbers"])
def test_alphabet_covers_every_example(name):
    task = get_task(name)
    vocab = CharTokenizer.from_texts([task.alphabet()])
    pairs = task(3000, 0) + task.held_out(500, 0)
    for source, target in pairs:
        vocab.encode(source), vocab.encode(target)  # raises on a missing character
    assert set(task.alphabet()) == set("".join(s + t for s, t in pairs))  # and nothing it never uses


# ---------------------------------------------------------------- dates


@pytest.mark.parametrize(("day", "fmt", "locale", "expected"), [
    (dt.date(2021, 3, 5), "long", "zh_CN", "2021年3月5日"),
    (dt.date(2021, 3, 5), "full", "zh_CN", "2021年3月5日星期五"),
    (dt.date(2021, 3, 5), "full", "en_US", "Friday, March 5, 2021"),
    (dt.date(2021, 3, 5), "full", "ja_JP", "2021年3月5日金曜日"),
    (dt.date(2021, 3, 5), "medium", "ja_JP", "2021/03/05"),
    (dt.date(2021, 3, 5), "medium", "de_DE", "05.03.2021"),
    (dt.date(2021, 3, 5), "full", "de_DE", "Freitag, 5. März 2021"),
    (dt.date(1999, 9, 25), "medium", "en_GB", "25 Sept 1999"),
    (dt.date(1999, 9, 25), "medium", "en_US", "Sep 25, 1999"),
    (dt.date(1999, 9, 25), "full", "es_ES", "sábado, 25 de septiembre de 1999"),
    (dt.date(1900, 1, 1), "medium", "fr_FR", "1 janv. 1900"),
    (dt.date(2099, 8, 31), "full", "fr_FR", "lundi 31 août 2099"),
])
def test_babel_writes_these_strings(day, fmt, locale, expected):
    assert babel_dates.format_date(day, fmt, locale=locale) == expected
    assert DATES.render(DateItem(day, locale, fmt)) == Pair(expected, day.isoformat())


def test_date_targets_are_the_day_that_wrote_the_source():
    for source, target in DATES(300, 1) + DATES.held_out(100, 1):
        day = dt.date.fromisoformat(target)
        assert day.isoformat() == target and FIRST_DAY <= day <= LAST_DAY
        assert source in {babel_dates.format_date(day, fmt, locale=loc)
                          for loc in DATE_LOCALES for fmt in DATE_FORMATS}


def test_dates_sample_every_style_and_the_whole_range():
    items = DATES.train_items(3000, 0)
    assert {(i.locale, i.format) for i in items} == {(loc, fmt) for loc in DATE_LOCALES for fmt in DATE_FORMATS}
    years = [i.day.year for i in items]
    assert min(years) < 1905 and max(years) > 2094
    assert {i.day.month for i in items} == set(range(1, 13)) and {i.day.day for i in items} == set(range(1, 32))


def test_date_sources_hold_no_invisible_spaces():
    text = "".join(p.source for p in DATES(3000, 2))
    assert all(c == " " or not c.isspace() for c in text)
    assert all(c.isascii() or c.isalpha() for c in text)


# ---------------------------------------------------------------- numbers

DIGITS = "零一二三四五六七八九"


def chinese_numeral(n: int) -> str:
    """An independent reference: groups of four digits (units, 万, 亿), 零 for inner zeros, a leading 一十 -> 十."""
    def group(g: int) -> str:  # 1 .. 9999
        out, zero = "", False
        for unit, power in (("千", 1000), ("百", 100), ("十", 10), ("", 1)):
            digit = g // power % 10
            if digit == 0:
                zero = zero or bool(out)
            else:
                out += ("零" if zero else "") + DIGITS[digit] + unit
                zero = False
        return out

    if n == 0:
        return "零"
    out, zero = "", False
    for g, name in ((n // 10**8, "亿"), (n // 10**4 % 10**4, "万"), (n % 10**4, "")):
        if g == 0:
            zero = zero or bool(out)
        else:
            out += ("零" if out and (zero or g < 1000) else "") + group(g) + name
            zero = False
    return out[1:] if out.startswith("一十") else out


@pytest.mark.parametrize(("number", "expected"), [
    (0, "零"), (7, "七"), (10, "十"), (11, "十一"), (19, "十九"), (20, "二十"), (101, "一百零一"), (110, "一百一十"),
    (1005, "一千零五"), (1010, "一千零一十"), (2000, "二千"), (10000, "一万"), (10001, "一万零一"),
    (12345, "一万二千三百四十五"), (100000, "十万"), (100010, "十万零一十"), (150000, "十五万"),
    (10010010, "一千零一万零一十"), (20000001, "二千万零一"), (99999999, "九千九百九十九万九千九百九十九"),
    (100000000, "一亿"),
])
def test_numbers_hand_worked(number, expected):
    assert NUMBERS.render(number) == Pair(str(number), expected)
    assert chinese_numeral(number) == expected  # the reference agrees with the hand-worked strings


zero_heavy = st.lists(st.sampled_from("0000001239"), min_size=1, max_size=8).map(lambda ds: int("".join(ds)))


@given(st.integers(0, NUMBER_MAX) | zero_heavy)
def test_numbers_round_trip_and_match_the_reference(number):
    source, target = NUMBERS.render(number)
    assert source == str(number)
    assert cn2an.cn2an(target) == number
    assert target == chinese_numeral(number)


def test_numbers_sample_every_magnitude_evenly():
    numbers = NUMBERS.train_items(8000, 0)
    assert all(0 <= x <= NUMBER_MAX for x in numbers)
    digits = collections.Counter(len(str(x)) for x in numbers if x != NUMBER_MAX)
    assert sorted(digits) == list(range(1, 9))
    assert all(0.10 < digits[d] / len(numbers) < 0.15 for d in range(4, 9))  # ≈ 0.12 each
    assert 0.005 < numbers.count(NUMBER_MAX) / len(numbers) < 0.015
    assert {x for x in numbers if x < 10} == set(range(10))


def test_task_registry():
    assert isinstance(TASKS["dates"], DatesTask) and isinstance(TASKS["numbers"], NumbersTask)
    assert get_task("numbers") is TASKS["numbers"]
