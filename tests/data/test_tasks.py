import collections
import datetime as dt
import random
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlab.data import TASKS, CharTokenizer, DatesTask, NumbersTask, Pair, Task, get_task
from attnlab.data.tasks import (
    DATE_FORMATS,
    DATE_LOCALES,
    DATE_MIXTURE,
    FIRST_DAY,
    LAST_DAY,
    LEAP_YEARS,
    NUMBER_HELD_OUT_MIXTURE,
    NUMBER_MAX,
    NUMBER_MIXTURE,
    POWERS_OF_TEN_PLUS_ONE,
    ROUND_BLOCKS,
    DateItem,
)

babel_dates = pytest.importorskip("babel.dates")
cn2an = pytest.importorskip("cn2an")

DATES, NUMBERS = TASKS["dates"], TASKS["numbers"]


def draws(task, n: int, seed: int = 0) -> list:
    """``n`` draws of ``task``'s training mixture, before the split (``draw`` is public: any stream is built of it)."""
    rng = random.Random(seed)
    return [task.draw(rng) for _ in range(n)]


def share(items, predicate) -> float:
    return sum(map(predicate, items)) / len(items)


# ---------------------------------------------------------------- determinism and the split


def test_known_streams_for_seed_zero():
    # pinned: the same (n, seed) must give these pairs on any machine and Python version
    assert DATES(3, 0) == [Pair("mercredi 29 juillet 2054", "2054-07-29"),
                           Pair("sábado, 3 de enero de 2099", "2099-01-03"),
                           Pair("Sonntag, 18. Dezember 2033", "2033-12-18")]
    assert NUMBERS(3, 0) == [Pair("26", "二十六"), Pair("400", "四百"), Pair("5190", "五千一百九十")]
    # the held-out streams draw as they did before the training mixtures oversampled anything
    assert DATES.held_out(2, 0) == [Pair("July 10, 1988", "1988-07-10"), Pair("dimanche 7 février 1915", "1915-02-07")]
    assert NUMBERS.held_out(2, 0) == [Pair("8746", "八千七百四十六"), Pair("77611", "七万七千六百一十一")]
    assert NUMBERS.round_items(3, 0)[80:] == [907005, 4660007, 204900]


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


class Twenty(Task):
    """A task of 20 items, of which only a few are held out: too few for a large evaluation set."""

    name = "twenty"

    def draw(self, rng):
        return rng.randrange(20)

    def render(self, item):
        return Pair(str(item), str(item))

    def split_key(self, item):
        return str(item)


def test_asking_for_more_held_out_examples_than_exist_is_an_error():
    task = Twenty()
    held = sorted(x for x in range(20) if task.is_held_out(x))
    assert 0 < len(held) < 5 and task.held_out_items(len(held), 0) != []
    with pytest.raises(ValueError, match=rf"twenty.held_out: found only {len(held)} distinct held-out examples, "
                                         r"asked for 5"):
        task.held_out(5, 0)


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


def test_leap_years_by_hand():
    # by hand: every fourth year from 1904 to 2096; 1900 is not a leap year (divisible by 100, not by 400), 2000 is
    assert tuple(range(1904, 2097, 4)) == LEAP_YEARS and len(LEAP_YEARS) == 49


def is_leap_day(day: dt.date) -> bool:
    return (day.month, day.day) == (2, 29)


def is_end_year(day: dt.date) -> bool:
    return day.year in (1900, 2099)


def is_single_digit(day: dt.date) -> bool:
    return day.day < 10 and day.month < 10


def test_date_draws_follow_the_mixture():
    # worked by hand from the module docstring: any day 85 %, then 5 % each for 29 February, a day of 1900 or
    # 2099, a day 1-9 of a month 1-9; 73,049 days in the range, 49 of them a 29 February, 730 in the end years,
    # 81 per year with a single-digit day and month
    days = [item.day for item in draws(DATES, 40_000)]
    n_days = (LAST_DAY - FIRST_DAY).days + 1
    assert n_days == 73_049
    assert share(days, is_leap_day) == pytest.approx(0.05 + 0.85 * 49 / n_days, abs=0.006)
    assert share(days, is_end_year) == pytest.approx(0.05 + 0.85 * 730 / n_days + 0.05 * 2 / 200, abs=0.006)
    single = 0.05 + 0.85 * 81 * 200 / n_days + 0.05 * 81 * 2 / 730
    assert share(days, is_single_digit) == pytest.approx(single, abs=0.01)  # ≈ 0.25


def test_every_style_sees_29_february_single_digits_and_both_end_years():
    items = DATES.train_items(20_000, 0)
    for style in [(loc, fmt) for loc in DATE_LOCALES for fmt in DATE_FORMATS]:
        days = [i.day for i in items if (i.locale, i.format) == style]
        assert any(map(is_leap_day, days)) and any(map(is_single_digit, days)), style
        assert {1900, 2099} <= {d.year for d in days}, style
    assert {i.day.month for i in items} == set(range(1, 13)) and {i.day.day for i in items} == set(range(1, 32))
    assert min(i.day for i in items) < dt.date(1900, 1, 15) and max(i.day for i in items) > dt.date(2099, 12, 15)


def test_29_february_sources_in_every_style():
    for loc in DATE_LOCALES:
        for fmt in DATE_FORMATS:
            source, target = DATES.render(DateItem(dt.date(2024, 2, 29), loc, fmt))
            assert target == "2024-02-29" and "29" in source


def test_random_held_out_dates_are_uniform_over_the_range():
    days = [item.day for item in DATES.held_out_items(2000, 0)]
    assert share(days, is_leap_day) < 0.005  # no oversampling: 49 days in 73,049
    assert 0.4 < share(days, lambda d: d.year < 2000) < 0.6


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


def no_two_zeros(m: int, q: float) -> float:
    """P(no ``00`` in m digits after a non-zero one, each ``0`` with probability q), by a two-state recursion."""
    ends_nonzero, ends_zero = 1.0, 0.0
    for _ in range(m):
        ends_nonzero, ends_zero = (ends_nonzero + ends_zero) * (1 - q), ends_nonzero * q
    return ends_nonzero + ends_zero


def one_digit_then_zeros(x: int) -> bool:
    return x >= 10 and str(x)[1:] == "0" * (len(str(x)) - 1)


@pytest.mark.parametrize("mixture", [NUMBER_MIXTURE, NUMBER_HELD_OUT_MIXTURE, DATE_MIXTURE])
def test_mixtures_are_percents_that_sum_to_100(mixture):
    assert sum(percent for _, percent in mixture) == 100 and all(percent > 0 for _, percent in mixture)


# The expected shares below are worked by hand from the mixture in the module docstring: digits 49 % (1 .. 8 digits
# uniform, then uniform), n·10^k 10 % (1 .. 7 zeros), zeros 40 % (3 .. 8 digits, each after the first 0 with
# probability 1/2), 10^8 1 %. 50,000 draws: one standard deviation of a share is at most 0.0023.
N_DRAWS, TOL = 50_000, 0.008


def test_number_draws_spread_over_magnitudes_as_the_mixture_says():
    numbers = draws(NUMBERS, N_DRAWS)
    assert all(0 <= x <= NUMBER_MAX for x in numbers)
    digits = collections.Counter(len(str(x)) for x in numbers)
    expected = {1: 0.49 / 8, 2: 0.49 / 8 + 0.10 / 7, 9: 0.01}
    expected |= {d: 0.49 / 8 + 0.10 / 7 + 0.40 / 6 for d in range(3, 9)}
    for d, p in expected.items():
        assert digits[d] / N_DRAWS == pytest.approx(p, abs=TOL), d
    assert {x for x in numbers if x < 10} == set(range(10))


def test_number_draws_are_round_as_often_as_the_mixture_says():
    numbers = draws(NUMBERS, N_DRAWS)
    # one digit then zeros: the n·10^k part, the zeros part when all its later digits are 0, a uniform d-digit
    # number once in 10^(d-1), and 10^8
    single = 0.10 + 0.40 * sum(2.0 ** -(d - 1) for d in range(3, 9)) / 6 \
        + 0.49 * sum(10.0 ** -(d - 1) for d in range(2, 9)) / 8 + 0.01
    assert share(numbers, one_digit_then_zeros) == pytest.approx(single, abs=TOL)
    some_zero = 0.10 + 0.01 + 0.40 * sum(1 - 0.5 ** (d - 1) for d in range(3, 9)) / 6 \
        + 0.49 * sum(1 - 0.9 ** (d - 1) for d in range(2, 9)) / 8
    assert share(numbers, lambda x: "0" in str(x)[1:]) == pytest.approx(some_zero, abs=TOL)  # ≈ 0.62
    run = 0.10 * 6 / 7 + 0.01 + 0.40 * sum(1 - no_two_zeros(d - 1, 0.5) for d in range(3, 9)) / 6 \
        + 0.49 * sum(1 - no_two_zeros(d - 1, 0.1) for d in range(2, 9)) / 8
    assert share(numbers, lambda x: "00" in str(x)) == pytest.approx(run, abs=TOL)  # ≈ 0.32
    # the digits part alone, for contrast: a run of zeros in fewer than one number in ten
    assert 0.49 * sum(1 - no_two_zeros(d - 1, 0.1) for d in range(2, 9)) / 8 / 0.49 < 0.1


def test_training_stream_is_the_draws_less_the_held_out():
    numbers, stream = draws(NUMBERS, N_DRAWS), NUMBERS.train_items(N_DRAWS, 0)
    # n·10^k are never held out and the split drops about 6 % of the draws: their share grows by at most 1/0.9
    before, after = share(numbers, one_digit_then_zeros), share(stream, one_digit_then_zeros)
    assert before - TOL < after < before / 0.9 + TOL
    assert NUMBER_MAX in stream and share(stream, lambda x: x == NUMBER_MAX) == pytest.approx(0.0107, abs=0.003)


def test_random_held_out_numbers_are_uniform_digits_as_before():
    held = NUMBERS.held_out_items(3000, 0)
    digits = collections.Counter(len(str(x)) for x in held)
    # 1/5 each for 5 .. 8 digits; four-digit ones run short of distinct held-out numbers (about 900 exist)
    assert set(digits) == set(range(4, 9)) and all(0.18 < digits[d] / 3000 < 0.24 for d in range(5, 9))
    assert 0.1 < digits[4] / 3000 < 0.2
    assert share(held, lambda x: "00" in str(x)) < 0.1  # the round set is the one with runs of zeros


def test_round_numbers_are_never_held_out_and_powers_of_ten_plus_one_always_are():
    singles = [n * 10**k for k in range(8) for n in range(1, 10)] + [NUMBER_MAX]
    assert sorted(ROUND_BLOCKS) == sorted(singles) and len(ROUND_BLOCKS) == 73
    assert not any(NUMBERS.is_held_out(x) for x in ROUND_BLOCKS)
    assert POWERS_OF_TEN_PLUS_ONE == (11, 101, 1001, 10001, 100001, 1000001, 10000001)
    assert [NUMBERS.is_held_out(x) for x in POWERS_OF_TEN_PLUS_ONE] == [False, False] + [True] * 5


ROUND = NUMBERS.round_items()


def test_round_set_holds_every_power_of_ten_n_10k_and_10k_plus_1_then_runs_of_zeros():
    assert len(ROUND) == len(set(ROUND)) == 1000
    assert {10**k for k in range(9)} <= set(ROUND)
    assert {n * 10**k for n in range(1, 10) for k in range(8)} <= set(ROUND)
    assert {10**k + 1 for k in range(1, 8)} <= set(ROUND)
    assert ROUND[:80] == [*ROUND_BLOCKS, *POWERS_OF_TEN_PLUS_ONE]
    sampled = ROUND[80:]
    assert all("00" in str(x) and 1000 <= x < NUMBER_MAX and NUMBERS.is_held_out(x) for x in sampled)
    assert collections.Counter(len(str(x)) for x in sampled).keys() == set(range(4, 9))


def test_round_set_is_never_trained_on_except_its_building_blocks():
    trained = {x for seed in range(3) for x in NUMBERS.train_items(30_000, seed)}
    assert trained.isdisjoint(ROUND[75:])  # 1001 .. 10000001, then the sampled ones
    assert set(ROUND_BLOCKS) <= trained  # the blocks are trained on, often
    assert sum(NUMBERS.is_held_out(x) for x in ROUND) == 925


@pytest.mark.parametrize(("number", "expected"), [
    (100000, "十万"), (1000001, "一百万零一"), (10001, "一万零一"), (10, "十"), (100000000, "一亿"),
    (30000000, "三千万"), (10000001, "一千万零一"), (1001, "一千零一")])
def test_round_targets_hand_worked(number, expected):
    assert (str(number), expected) in set(NUMBERS.round_held_out())


def test_round_targets_match_cn2an_and_the_reference():
    for source, target in NUMBERS.round_held_out():
        number = int(source)
        assert target == cn2an.an2cn(number) == chinese_numeral(number)
        assert cn2an.cn2an(target) == number


def test_round_set_is_a_function_of_its_seed():
    assert NUMBERS.round_items(50, 3) == NUMBERS.round_items(50, 3) == NUMBERS.round_items(80, 3)[:130]
    assert NUMBERS.round_items(50, 3) != NUMBERS.round_items(50, 4)
    assert NUMBERS.round_items(0, 3) == [*ROUND_BLOCKS, *POWERS_OF_TEN_PLUS_ONE]
    with pytest.raises(ValueError, match=r"numbers\.round_held_out: n must be an int >= 0, got -1"):
        NUMBERS.round_held_out(-1)


def test_task_registry():
    assert isinstance(TASKS["dates"], DatesTask) and isinstance(TASKS["numbers"], NumbersTask)
    assert get_task("numbers") is TASKS["numbers"]
