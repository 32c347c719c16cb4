"""Generated translation tasks whose attention alignments mean something.

Each task draws items from an input space and renders them with a real library, so the targets
are right by construction and a trained model's cross-attention can be read against a known
alignment (the day's digits, the month's name, each Chinese digit and its place).

``dates``: a human-readable date -> ISO 8601, e.g. ``"Friday, March 5, 2021" -> "2021-03-05"``.
  Sources are ``babel.dates.format_date`` in the ``full``, ``long`` and ``medium`` formats of
  en_US, en_GB, zh_CN, fr_FR, de_DE, es_ES and ja_JP, for days 1900-01-01 .. 2099-12-31. What babel
  2.18 (CLDR 47) writes, checked over every day of the range: plain ASCII spaces only (no no-break
  or narrow no-break space); sources up to 35 characters; no two (day, locale, format) that give one
  source for two different days. Worth knowing when reading attention maps:

  * de_DE ``medium`` and ja_JP ``medium`` are all digits (``05.03.2021``, ``2021/03/05``): the
    day and month are zero-padded, as in the target, so the alignment is a near-copy;
  * zh_CN ``long``, zh_CN ``medium`` and ja_JP ``long`` are one and the same string
    (``2021年3月5日``); zh_CN and ja_JP ``full`` differ only in the weekday (``星期五``, ``金曜日``);
  * abbreviations differ by locale: en_US ``Sep``, en_GB ``Sept``, es_ES ``sept`` (no dot),
    fr_FR ``sept.``, ``févr.``, ``août``; fr_FR has no comma (``vendredi 5 mars 2021``) and writes
    the first of the month ``1``, not ``1er``;
  * ``full`` carries the weekday, which the target does not: the model must learn to ignore it.

  The training stream is the mixture :data:`DATE_MIXTURE` (percent of the draws): 85 any day of the
  range; 5 a 29 February (one of the range's 49 leap years: 1900 is not one, 2000 is); 5 a day of
  the first or the last year (1900, 2099); 5 a day 1-9 of a month 1-9 (``5 mars``, ``2021/03/05``:
  padded in some styles, not in others). Locale and format are uniform in every part. A uniform
  draw shows each style a 29 February about 3 times in 100,000 pairs; the mixture shows it about
  240 times, and every style all four kinds of day in a stream of 20,000. The held-out set draws
  any day, uniformly.

  Exact strings follow the CLDR data of the installed babel, so the data set is a function of
  ``(n, seed)`` *and* babel's version (the tests pin a few strings).

``numbers``: Arabic numerals -> Chinese numerals with ``cn2an.an2cn``, 0 .. 10⁸ inclusive
  (``12345 -> 一万二千三百四十五``). cn2an's convention (its default ``"low"`` mode):

  * ``十``, not ``一十``, when it begins the number (``10 -> 十``, ``11 -> 十一``, ``19 -> 十九``,
    ``100000 -> 十万``, ``150000 -> 十五万``), but ``一十`` after a higher digit (``110 -> 一百一十``,
    ``1010 -> 一千零一十``, ``100010 -> 十万零一十``);
  * one ``零`` for each run of zeros inside the number, none at its end (``1005 -> 一千零五``,
    ``10001 -> 一万零一``, ``10010010 -> 一千零一万零一十``, ``20000001 -> 二千万零一``);
  * ``二`` always, never ``两`` (``2000 -> 二千``, ``20000 -> 二万``); ``0 -> 零``; ``10⁸ -> 一亿``.

  The training stream is the mixture :data:`NUMBER_MIXTURE` (percent of the draws):

  * 49, *digits*: the number of digits (1 .. 8) uniform, then the number uniform among those with
    that many digits (0 counts as one digit). Magnitudes are log-uniform by decade: uniform over
    0 .. 10⁸ would give eight digits to 90 % of the numbers and a one-digit number once in ten million;
  * 10, *n·10^k*: a digit 1-9 followed by 1 .. 7 zeros (uniform): ``300000``, ``10000000``;
  * 40, *zeros*: the number of digits (3 .. 8) uniform, the first 1-9, each other one ``0`` with
    probability 1/2 (a uniform digit is ``0`` with probability 1/10), else 1-9: ``1000001``,
    ``10500``, ``20030000``, ``7006``;
  * 1: 10⁸, the only nine-digit number and the only one with ``亿``: often enough to be learnt.

  Round numbers and zeros inside numbers are what people type most, and a uniform draw rarely gives
  them: a uniform eight-digit number ends in ``000`` once in a thousand draws. Trained on the
  *digits* part alone for 2,500 steps (the benchmark's model), a model scored 100 % on random
  held-out numbers and 86.7 % on the round ones, writing ``100000 -> 十`` and ``1000000 -> 一百``;
  with the mixture, 100 % on both. The random held-out set (:meth:`Task.held_out`) still
  draws from the *digits* part (and 10⁸, never held out) only; :meth:`NumbersTask.round_held_out`
  is the round one (below).

**Held-out examples.** Every item has a *split key* (the day for ``dates``, the number for
``numbers``); a fixed 10 % of the keys, chosen by a SHA-256 hash of the key and independent of the
seed, is held out. :meth:`Task.__call__` (the training stream) never draws a held-out key and
:meth:`Task.held_out` draws only those, so held-out sources never occur in any training stream,
whatever the seeds. For ``dates`` that is stronger than disjoint sources: a held-out day is never
seen in any locale or format. Some numbers are never held out: there are so few of them, and they
are the building blocks of all the others (holding out 10 % of the ten one-digit numbers would
leave a digit never seen on its own): those below 1000, and :data:`ROUND_BLOCKS`, every single
digit followed by zeros (``n·10^k``: every power of ten, 10⁸ included). Others always are:
:data:`POWERS_OF_TEN_PLUS_ONE` from 1001 to 10000001, so that a model is scored on them without
having seen them. Skipping held-out keys makes the other numbers of four digits or more about 10 %
rarer in the training stream than the mixture says.

**The round-number evaluation set** (:meth:`NumbersTask.round_held_out`, the one the benchmark and
the tests use): the 73 :data:`ROUND_BLOCKS` (trained on: a model must know them as it knows the
digits), the seven :data:`POWERS_OF_TEN_PLUS_ONE` (the five from 1001 on held out), then distinct
held-out numbers of the *zeros* part with a run of at least two zeros (``00``): 920 of them by
default, 1,000 in all, of which 925 are never in any training stream.

**Determinism.** Each stream is a ``random.Random`` seeded with the string
``"attnlab/<task>/<part>/<seed>"`` (string seeds are hashed with SHA-512, the same on every machine
and Python version) and draws with ``randrange`` only; a longer stream extends a shorter one.
``babel`` and ``cn2an`` are optional (``pip install 'attnlab[seq2seq]'``) and imported on first use.
"""

from __future__ import annotations

import calendar
import datetime as dt
import hashlib
import random
from collections.abc import Callable
from typing import Any, NamedTuple

from attnlab.data.pairs import Pair
from attnlab.i18n import tr

DATE_LOCALES = ("en_US", "en_GB", "zh_CN", "fr_FR", "de_DE", "es_ES", "ja_JP")
DATE_FORMATS = ("full", "long", "medium")
FIRST_DAY, LAST_DAY = dt.date(1900, 1, 1), dt.date(2099, 12, 31)
LEAP_YEARS = tuple(y for y in range(FIRST_DAY.year, LAST_DAY.year + 1) if calendar.isleap(y))
NUMBER_MAX = 10**8
HELD_OUT_PER_MILLE = 100  # 10 % of the split keys

#: what the dates training stream draws: (part, percent of the draws); see the module docstring
DATE_MIXTURE = (("any day", 85), ("29 February", 5), ("first or last year", 5), ("single-digit day and month", 5))
#: what the numbers training stream draws: (part, percent of the draws); see the module docstring
NUMBER_MIXTURE = (("digits", 49), ("n·10^k", 10), ("zeros", 40), ("10^8", 1))
#: the random held-out numbers: the digits part (and 10⁸, which is never held out)
NUMBER_HELD_OUT_MIXTURE = (("10^8", 1), ("digits", 99))
#: never held out: every single digit followed by zeros (``n·10^k``, every power of ten among them, 10⁸ too)
ROUND_BLOCKS = tuple(sorted({n * 10**k for k in range(8) for n in range(1, 10)} | {NUMBER_MAX}))
#: every 10^k + 1; from 1001 on, always held out (11 and 101 are below 1000: never held out)
POWERS_OF_TEN_PLUS_ONE = tuple(10**k + 1 for k in range(1, 8))


def _optional(module: str):
    """Import an optional dependency of the tasks, or say which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(tr("the translation tasks need {package!r}: pip install 'attnlab[seq2seq]'",
                             package=module.split('.')[0])) \
            from err


def _check_count(n: int, seed: int, owner: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(tr("{owner}: n must be an int >= 0, got {n!r}", owner=owner, n=n))
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(tr("{owner}: seed must be an int, got {seed!r}", owner=owner, seed=seed))


def _pick(rng: random.Random, mixture: tuple[tuple[str, int], ...]) -> str:
    """The part of ``mixture`` (``(name, percent)`` pairs summing to 100) that one draw of ``rng`` falls in."""
    r = rng.randrange(100)
    for name, percent in mixture:
        if r < percent:
            return name
        r -= percent
    raise ValueError(f"mixture percents sum to less than 100: {mixture}")


class Task:
    """A generated task: ``task(n, seed)`` is ``n`` training pairs, ``task.held_out(n, seed)`` ``n`` held-out ones.

    Subclasses say how to :meth:`draw` an item (and :meth:`draw_held_out`, where the evaluation
    draws differently), :meth:`render` it as a :class:`Pair` and which :meth:`split_key` decides
    its side of the split.
    """

    name: str

    def draw(self, rng: random.Random) -> Any:
        raise NotImplementedError

    def draw_held_out(self, rng: random.Random) -> Any:
        """One candidate for the held-out set (kept if :meth:`is_held_out`); by default as for training."""
        return self.draw(rng)

    def render(self, item: Any) -> Pair:
        raise NotImplementedError

    def split_key(self, item: Any) -> str:
        raise NotImplementedError

    def alphabet(self) -> str:
        """Every character a source or target of this task can hold, sorted (to build a complete vocabulary)."""
        raise NotImplementedError

    def can_hold_out(self, item: Any) -> bool:
        return True

    def is_held_out(self, item: Any) -> bool:
        digest = hashlib.sha256(f"{self.name}/{self.split_key(item)}".encode()).digest()
        return self.can_hold_out(item) and int.from_bytes(digest[:8], "little") % 1000 < HELD_OUT_PER_MILLE

    def train_items(self, n: int, seed: int) -> list[Any]:
        """``n`` items of the training stream (repeats allowed, as in any stream of examples)."""
        _check_count(n, seed, f"{self.name}")
        rng = random.Random(f"attnlab/{self.name}/train/{seed}")
        items: list[Any] = []
        while len(items) < n:
            item = self.draw(rng)
            if not self.is_held_out(item):
                items.append(item)
        return items

    def held_out_items(self, n: int, seed: int) -> list:
        """``n`` held-out items with distinct sources (an evaluation set counts each example once)."""
        _check_count(n, seed, f"{self.name}.held_out")
        return self._distinct_held_out(self.draw_held_out, random.Random(f"attnlab/{self.name}/held_out/{seed}"), n,
                                      f"{self.name}.held_out")

    def _distinct_held_out(self, draw: Callable[[random.Random], Any], rng: random.Random, n: int, owner: str,
                           items: list | None = None) -> list:
        """``items`` followed by held-out ``draw(rng)`` items, each with a new source, until there are ``n``."""
        items = list(items or [])
        seen, draws, limit = {self.render(item).source for item in items}, 0, 1000 * (n + 10)
        while len(items) < n:
            draws += 1
            if draws > limit:  # held-out keys are 10 % of draws: a limit this far away means too few exist
                raise ValueError(tr("{name}: found only {n_items} distinct held-out examples, asked for {n}",
                                    name=owner, n_items=len(items), n=n))
            item = draw(rng)
            if self.is_held_out(item):
                source = self.render(item).source
                if source not in seen:
                    seen.add(source)
                    items.append(item)
        return items

    def __call__(self, n: int, seed: int) -> list[Pair]:
        return [self.render(item) for item in self.train_items(n, seed)]

    def held_out(self, n: int, seed: int) -> list[Pair]:
        return [self.render(item) for item in self.held_out_items(n, seed)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class DateItem(NamedTuple):
    day: dt.date
    locale: str
    format: str


def _any_day(rng: random.Random) -> dt.date:
    return FIRST_DAY + dt.timedelta(days=rng.randrange((LAST_DAY - FIRST_DAY).days + 1))


def _leap_day(rng: random.Random) -> dt.date:
    return dt.date(LEAP_YEARS[rng.randrange(len(LEAP_YEARS))], 2, 29)


def _end_year_day(rng: random.Random) -> dt.date:
    year = (FIRST_DAY.year, LAST_DAY.year)[rng.randrange(2)]
    return dt.date(year, 1, 1) + dt.timedelta(days=rng.randrange(366 if year in LEAP_YEARS else 365))


def _single_digit_day(rng: random.Random) -> dt.date:
    return dt.date(FIRST_DAY.year + rng.randrange(LAST_DAY.year - FIRST_DAY.year + 1), 1 + rng.randrange(9),
                   1 + rng.randrange(9))


_DATE_PARTS = {"any day": _any_day, "29 February": _leap_day, "first or last year": _end_year_day,
               "single-digit day and month": _single_digit_day}


class DatesTask(Task):
    """Human-readable dates (babel, seven locales, three formats) -> ISO 8601."""

    name = "dates"

    def draw(self, rng: random.Random) -> DateItem:
        return self._in_any_style(_DATE_PARTS[_pick(rng, DATE_MIXTURE)](rng), rng)

    def draw_held_out(self, rng: random.Random) -> DateItem:
        return self._in_any_style(_any_day(rng), rng)

    @staticmethod
    def _in_any_style(day: dt.date, rng: random.Random) -> DateItem:
        return DateItem(day, DATE_LOCALES[rng.randrange(len(DATE_LOCALES))],
                        DATE_FORMATS[rng.randrange(len(DATE_FORMATS))])

    def render(self, item: DateItem) -> Pair:
        babel_dates = _optional("babel.dates")
        return Pair(babel_dates.format_date(item.day, item.format, locale=item.locale), item.day.isoformat())

    def split_key(self, item: DateItem) -> str:
        return item.day.isoformat()

    def alphabet(self) -> str:
        # one leap year shows every month, weekday and day of the month in every style; the years add only digits
        days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(366)]
        chars = {c for d in days for loc in DATE_LOCALES for fmt in DATE_FORMATS
                 for c in self.render(DateItem(d, loc, fmt)).source}
        return "".join(sorted(chars | set("0123456789-")))


def _digits_number(rng: random.Random) -> int:
    digits = 1 + rng.randrange(8)
    low = 0 if digits == 1 else 10 ** (digits - 1)
    return low + rng.randrange(10**digits - low)


def _digit_and_zeros(rng: random.Random) -> int:
    return (1 + rng.randrange(9)) * 10 ** (1 + rng.randrange(7))


def _zeros_number(rng: random.Random) -> int:
    out = 1 + rng.randrange(9)
    for _ in range(2 + rng.randrange(6)):  # 3 .. 8 digits in all
        out = 10 * out + (0 if rng.randrange(2) else 1 + rng.randrange(9))
    return out


_NUMBER_PARTS = {"digits": _digits_number, "n·10^k": _digit_and_zeros, "zeros": _zeros_number,
                 "10^8": lambda rng: NUMBER_MAX}


class NumbersTask(Task):
    """Arabic numerals (``"1005"``) -> Chinese numerals (``"一千零五"``) with cn2an, 0 .. 10⁸."""

    name = "numbers"

    def draw(self, rng: random.Random) -> int:
        return _NUMBER_PARTS[_pick(rng, NUMBER_MIXTURE)](rng)

    def draw_held_out(self, rng: random.Random) -> int:
        return _NUMBER_PARTS[_pick(rng, NUMBER_HELD_OUT_MIXTURE)](rng)

    def render(self, item: int) -> Pair:
        return Pair(str(item), _optional("cn2an").an2cn(item))

    def split_key(self, item: int) -> str:
        return str(item)

    def can_hold_out(self, item: int) -> bool:
        return 1000 <= item < NUMBER_MAX and item not in ROUND_BLOCKS

    def is_held_out(self, item: int) -> bool:
        return super().is_held_out(item) or (self.can_hold_out(item) and item in POWERS_OF_TEN_PLUS_ONE)

    def round_items(self, n_sampled: int = 920, seed: int = 0) -> list[int]:
        """The round-number evaluation set: :data:`ROUND_BLOCKS`, :data:`POWERS_OF_TEN_PLUS_ONE`, ``n_sampled`` more.

        The sampled ones are distinct numbers of the *zeros* part (``3000020``, ``20030000``) with a
        run of at least two zeros, and held out: no training stream ever draws them.
        """
        _check_count(n_sampled, seed, f"{self.name}.round_held_out")

        def draw(rng: random.Random) -> int:
            while "00" not in str(number := _zeros_number(rng)):
                pass
            return number

        rng = random.Random(f"attnlab/{self.name}/round/{seed}")
        fixed = [*ROUND_BLOCKS, *POWERS_OF_TEN_PLUS_ONE]
        return self._distinct_held_out(draw, rng, len(fixed) + n_sampled, f"{self.name}.round_held_out", items=fixed)

    def round_held_out(self, n_sampled: int = 920, seed: int = 0) -> list[Pair]:
        """:meth:`round_items` as pairs: 80 + ``n_sampled`` of them."""
        return [self.render(item) for item in self.round_items(n_sampled, seed)]

    def alphabet(self) -> str:
        return "".join(sorted("0123456789零一二三四五六七八九十百千万亿"))


TASKS: dict[str, Task] = {"dates": DatesTask(), "numbers": NumbersTask()}


def get_task(name: str) -> Task:
    """The task called ``name`` (a key of :data:`TASKS`)."""
    if name not in TASKS:
        raise ValueError(tr("task must be one of {tasks}, got {name!r}", tasks=', '.join(map(repr, TASKS)), name=name))
    return TASKS[name]
