"""A time budget turned into a number of steps: probe the step time, plan, re-plan as the speed changes.

A budget of ``seconds`` is only useful to the learning-rate schedule once it is a step count: the cosine must
know where it ends. So the run's first steps are a probe (their time measured, the very first left out: it
pays for one-time set-up), and the planner answers "how many steps fit in the time left?". The speed of a
shared machine changes, so the answer is revised at every evaluation and whenever a twentieth of the steps the
last plan had left has passed, from the time the steps since the last plan took: the trainer then moves the cosine's end
(:meth:`attnlab.training.optim.CosineSchedule.replan`), so that the rate reaches ``min_lr`` at the last step.

Every future step costs the measured step time, and every evaluation (each ``eval_interval`` steps, and one at
the end, with its checkpoint) the last measured evaluation time. The clock is a parameter: tests drive the planner
with a fake one. Under ``torchrun``, ``reduce`` averages the measurements over the processes, so that every
process makes the same plan and stops at the same step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from attnlab.training.optim import CosineSchedule

#: steps timed before the first plan (after the first step, which is left out)
PROBE_STEPS = 8
#: a plan is revised at every evaluation, and after this share of the steps it had left (but no fewer than a
#: probe's: the time of fewer steps is too noisy to plan on)
REPLAN_SHARE = 0.05
#: warm-up takes at most this share of the planned steps: a short budget still spends most of it decaying
MAX_WARMUP_SHARE = 0.1


@dataclass(frozen=True)
class Plan:
    """One plan, made at step ``step``: ``steps`` is where the run ends (the step count after its last step)."""

    step: int
    steps: int
    step_seconds: float  # measured: one training step
    eval_seconds: float  # measured: one evaluation and its checkpoint (0 until the first one)
    seconds_left: float


def planned_warmup(warmup_iters: int, steps: int) -> int:
    """The warm-up a run of ``steps`` steps gets: ``warmup_iters``, but at most a tenth of the run."""
    return min(warmup_iters, int(MAX_WARMUP_SHARE * steps))


def fit_schedule(schedule: CosineSchedule, plan: Plan, step: int, warmup_iters: int, decay_iters: int,
                 first: bool) -> None:
    """Fit ``schedule`` to ``plan`` at step ``step``: on the first plan, a warm-up still under way is fitted to the
    planned steps (ended now, if they are so few that it should be over); the cosine reaches ``min_lr`` at the plan's
    last step (or at ``decay_iters``, if sooner), so that the last step trains at ``min_lr``."""
    if first and step < schedule.warmup:
        schedule.warmup = max(step, planned_warmup(warmup_iters, plan.steps))
    schedule.replan(step, min(decay_iters, plan.steps - 1))


class BudgetPlanner:
    """Plans how many steps fit in ``seconds`` of wall-clock time (see the module's docstring).

    The trainer calls :meth:`start` once, :meth:`stepped` after every step, :meth:`evaluated` after every
    evaluation and checkpoint; the last two return a new :class:`Plan` when they made one, else None.
    """

    def __init__(self, seconds: float, max_steps: int, eval_interval: int,
                 clock: Callable[[], float] = time.perf_counter,
                 reduce: Callable[[list[float]], list[float]] = lambda values: values,
                 probe_steps: int = PROBE_STEPS) -> None:
        self.seconds, self.max_steps, self.eval_interval = seconds, max_steps, eval_interval
        self.clock, self.reduce, self.probe_steps = clock, reduce, probe_steps
        self.plan: Plan | None = None
        self.started = 0.0
        self.eval_seconds = 0.0
        self.timed_steps, self.timed_seconds, self.first_step = 0, 0.0, True

    def start(self) -> None:
        """The budget starts now (a resumed run gets a fresh one)."""
        self.started = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def expired(self) -> bool:
        """The whole budget is spent: stop now, whatever the plan said."""
        return self.elapsed() >= self.seconds

    def stepped(self, step: int, seconds: float) -> Plan | None:
        """A training step took ``seconds``; ``step`` steps are done. Plans at the end of the probe, and once a
        twentieth of the steps the last plan had left are done."""
        if self.first_step:  # allocations, lazy initialisation, caches: not the speed of the steps to come
            self.first_step = False
            return None
        self.timed_steps, self.timed_seconds = self.timed_steps + 1, self.timed_seconds + seconds
        if self.plan is None:
            return self._replan(step) if self.timed_steps >= self.probe_steps else None
        if self.timed_steps >= max(self.probe_steps, int(REPLAN_SHARE * (self.plan.steps - self.plan.step))):
            return self._replan(step)
        return None

    def evaluated(self, step: int, seconds: float) -> Plan | None:
        """An evaluation and its checkpoint took ``seconds``: re-plan with the newest speed (once probed)."""
        self.eval_seconds = seconds
        return None if self.plan is None else self._replan(step)

    def _replan(self, step: int) -> Plan:
        # the steps since the last plan give the speed; right after one (an evaluation on a planned step), its speed
        if self.timed_steps:
            window = self.timed_seconds / self.timed_steps
        else:
            assert self.plan is not None  # only evaluated() re-plans before a timed step, and only with a plan
            window = self.plan.step_seconds
        step_s, eval_s, elapsed = self.reduce([window, self.eval_seconds, self.elapsed()])
        left = self.seconds - elapsed
        more = self.steps_that_fit(step, left, step_s, eval_s)
        self.plan = Plan(step, min(self.max_steps, step + more), step_s, eval_s, left)
        self.timed_steps, self.timed_seconds = 0, 0.0
        return self.plan

    def steps_that_fit(self, step: int, seconds: float, step_s: float, eval_s: float) -> int:
        """The most steps after step ``step`` that fit in ``seconds``, with the evaluations they bring."""
        every = self.eval_interval

        def cost(n: int) -> float:  # n steps, an evaluation at each multiple of eval_interval, and one at the end
            evals = (step + n) // every - step // every + ((step + n) % every > 0)
            return n * step_s + evals * eval_s

        if step_s <= 0:
            return self.max_steps
        # the evaluations spread over the steps give a first guess; the exact count moves it by a few at most
        n = max(0, int((seconds - eval_s) / (step_s + eval_s / self.eval_interval)))
        while n > 0 and cost(n) > seconds:
            n -= 1
        while n < self.max_steps and cost(n + 1) <= seconds:
            n += 1
        return n
