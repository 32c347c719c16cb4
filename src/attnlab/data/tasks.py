"""Generated translation tasks whose attention alignments mean something.

Each task draws items from an input space and renders them with a real library, so the targets
are right by construction and a trained model's cross-attention can be read against a known
alignment (the day's digits, the month's name, each Chinese digit and its place).

``dates``: a human-readable date -> ISO 8601, e.g. ``"Friday, March 5, 2021" -> "2021-03-05"``.
  Sources are ``babel.dates.format_date`` in the ``full``, ``long`` and ``medium`` formats of
  en_US, en_GB, zh_CN, fr_FR, de_DE, es_ES and ja_JP, for days 1900-01-01 .. 2099-12-31 (uniform
  over days, locales and formats). What babel 2.18 (CLDR 47) writes, checked over every day of the
  range: plain ASCII spaces only (no no-break or narrow no-break space); sources up to 35
  characters; no two (day, locale, format) that give one source for two different days. Worth
  knowing when reading attention maps:

  * de_DE ``medium`` and ja_JP ``medium`` are all digits (``05.03.2021``, ``2021/03/05``): the
    day and month are zero-padded, as in the target, so the alignment is a near-copy;
  * zh_CN ``long``, zh_CN ``medium`` and ja_JP ``long`` are one and the same string
    (``2021年3月5日``); zh_CN and ja_JP ``full`` differ only in the weekday (``星期五``, ``金曜日``);
  * abbreviations differ by locale: en_US ``Sep``, en_GB ``Sept``, es_ES ``sept`` (no dot),
    fr_FR ``sept.``, ``févr.``, ``août``; fr_FR has no comma (``vendredi 5 mars 2021``) and writes
    the first of the month ``1``, not ``1er``;
  * ``full`` carries the weekday, which the target does not: the model must learn to ignore it.

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

  Why not uniform over 0 .. 10⁸: 90 % of the numbers would have eight digits and a one-digit
  number would turn up once in ten million. Instead the number of digits (1 .. 8) is uniform,
  then the number is uniform among those with that many digits (0 counts as one digit). 10⁸, the
  only nine-digit number and the only one with ``亿``, is drawn once in 100 examples on average:
  often enough to be learnt, rarely enough not to crowd out the rest.

**Held-out examples.** Every item has a *split key* (the day for ``dates``, the number for
``numbers``); a fixed 10 % of the keys, chosen by a SHA-256 hash of the key and independent of the
seed, is held out. :meth:`Task.__call__` (the training stream) never draws a held-out key and
:meth:`Task.held_out` draws only those, so held-out sources never occur in any training stream,
whatever the seeds. For ``dates`` that is stronger than disjoint sources: a held-out day is never
seen in any locale or format. Numbers below 1000 and 10⁸ are never held out: there are so few of
them, and they are the building blocks of all the others (holding out 10 % of the ten one-digit
numbers would leave a digit never seen on its own). Skipping held-out keys makes four- to
eight-digit numbers about 10 % rarer than shorter ones in the training stream (≈ 11.9 % against
13.2 % each).

**Determinism.** Each stream is a ``random.Random`` seeded with the string
``"attnlab/<task>/<part>/<seed>"`` (string seeds are hashed with SHA-512, the same on every machine
and Python version) and draws with ``randrange`` only; a longer stream extends a shorter one.
``babel`` and ``cn2an`` are optional (``pip install 'attnlab[seq2seq]'``) and imported on first use.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from typing import Any, NamedTuple

from attnlab.data.pairs import Pair
from attnlab.i18n import tr

DATE_LOCALES = ("en_US", "en_GB", "zh_CN", "fr_FR", "de_DE", "es_ES", "ja_JP")
DATE_FORMATS = ("full", "long", "medium")
FIRST_DAY, LAST_DAY = dt.date(1900, 1, 1), dt.date(2099, 12, 31)
NUMBER_MAX = 10**8
HELD_OUT_PER_MILLE = 100  # 10 % of the split keys


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


class Task:
    """A generated task: ``task(n, seed)`` is ``n`` training pairs, ``task.held_out(n, seed)`` ``n`` held-out ones.

    Subclasses say how to :meth:`draw` an item, :meth:`render` it as a :class:`Pair` and which
    :meth:`split_key` decides its side of the split.
    """

    name: str

    def draw(self, rng: random.Random) -> Any:
        raise NotImplementedError

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

    def train_items(self, n: int, seed: int) -> list:
        """``n`` items of the training stream (repeats allowed, as in any stream of examples)."""
        _check_count(n, seed, f"{self.name}")
        rng, items = random.Random(f"attnlab/{self.name}/train/{seed}"), []
        while len(items) < n:
            item = self.draw(rng)
            if not self.is_held_out(item):
                items.append(item)
        return items

    def held_out_items(self, n: int, seed: int) -> list:
        """``n`` held-out items with distinct sources (an evaluation set counts each example once)."""
        _check_count(n, seed, f"{self.name}.held_out")
        rng, items, seen = random.Random(f"attnlab/{self.name}/held_out/{seed}"), [], set()
        draws, limit = 0, 1000 * (n + 10)  # held-out keys are 10 % of draws: far more than enough
        while len(items) < n:
            draws += 1
            if draws > limit:
                raise ValueError(tr("{name}.held_out: found only {n_items} distinct held-out examples, asked for {n}",
                                    name=self.name, n_items=len(items), n=n))
            item = self.draw(rng)
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


class DatesTask(Task):
    """Human-readable dates (babel, seven locales, three formats) -> ISO 8601."""

    name = "dates"

    def draw(self, rng: random.Random) -> DateItem:
        day = FIRST_DAY + dt.timedelta(days=rng.randrange((LAST_DAY - FIRST_DAY).days + 1))
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


class NumbersTask(Task):
    """Arabic numerals (``"1005"``) -> Chinese numerals (``"一千零五"``) with cn2an, 0 .. 10⁸."""

    name = "numbers"

    def draw(self, rng: random.Random) -> int:
        if rng.randrange(100) == 0:
            return NUMBER_MAX
        digits = 1 + rng.randrange(8)
        low = 0 if digits == 1 else 10 ** (digits - 1)
        return low + rng.randrange(10**digits - low)

    def render(self, item: int) -> Pair:
        return Pair(str(item), _optional("cn2an").an2cn(item))

    def split_key(self, item: int) -> str:
        return str(item)

    def can_hold_out(self, item: int) -> bool:
        return 1000 <= item < NUMBER_MAX

    def alphabet(self) -> str:
        return "".join(sorted("0123456789零一二三四五六七八九十百千万亿"))


TASKS: dict[str, Task] = {"dates": DatesTask(), "numbers": NumbersTask()}


def get_task(name: str) -> Task:
    """The task called ``name`` (a key of :data:`TASKS`)."""
    if name not in TASKS:
        raise ValueError(tr("task must be one of {tasks}, got {name!r}", tasks=', '.join(map(repr, TASKS)), name=name))
    return TASKS[name]
