"""A time budget plans its steps: the probe, the plan, the re-plan when the speed changes, and the last step at
min_lr, shown with a fake clock (the steps really train; only the time is made up)."""

import itertools
import math

import pytest

from attnlab.training import Seq2SeqTrainConfig, Seq2SeqTrainer, Trainer
from attnlab.training.budget import PROBE_STEPS, BudgetPlanner, planned_warmup
from attnlab.training.optim import CosineSchedule, inverse_sqrt_lr, lr_at


class FakeClock:
    """Time that passes only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Timed:
    """Mixed into a trainer: its steps and evaluations take the (fake) time the test says; it records every step's
    lr."""

    def __init__(self, *args, step_seconds, eval_seconds, **kwargs):
        self.step_seconds, self.eval_seconds, self.lrs = step_seconds, eval_seconds, []
        super().__init__(*args, **kwargs)

    def train_step(self):
        self.lrs.append(self.learning_rate_at(self.step))
        self.clock.now += self.step_seconds(self.step)
        return super().train_step()

    def evaluate(self):
        self.clock.now += self.eval_seconds
        return super().evaluate()


class TimedTrainer(Timed, Trainer):
    pass


class TimedSeq2SeqTrainer(Timed, Seq2SeqTrainer):
    pass


# ---- the schedule a plan moves -------------------------------------------------------------------------------------
def test_a_schedule_never_replanned_is_lr_at():
    schedule = CosineSchedule(1e-3, 1e-4, warmup=10, end=100)
    assert [schedule(s) for s in range(130)] == [lr_at(s, 1e-3, 1e-4, 10, 100) for s in range(130)]


def test_a_replan_keeps_the_rate_and_ends_at_min_lr_on_the_new_end():
    schedule = CosineSchedule(1e-3, 1e-4, warmup=10, end=100)
    before = schedule(40)  # progress 30/90 = 1/3 of the cosine
    schedule.replan(40, end=70)  # the machine slowed down: 30 steps left, not 60
    assert schedule(40) == before
    # the rest of the cosine, squeezed: half-way through the 30 steps left is progress 1/3 + 2/3 · 1/2 = 2/3
    assert schedule(55) == pytest.approx(1e-4 + 0.5 * (1 + math.cos(2 / 3 * math.pi)) * 9e-4, rel=1e-12)
    assert schedule(70) == schedule(500) == 1e-4
    lrs = [schedule(s) for s in range(40, 80)]  # from the re-plan on (the steps before it are history)
    assert all(a >= b for a, b in itertools.pairwise(lrs))


def test_a_replan_during_warmup_moves_only_the_end():
    schedule = CosineSchedule(1e-3, 1e-4, warmup=10, end=100)
    schedule.replan(5, end=50)
    assert [schedule(s) for s in range(60)] == [lr_at(s, 1e-3, 1e-4, 10, 50) for s in range(60)]


def test_warmup_is_at_most_a_tenth_of_the_planned_steps():
    assert planned_warmup(100, 5000) == 100 and planned_warmup(100, 480) == 48 and planned_warmup(100, 5) == 0


# ---- the planner alone ---------------------------------------------------------------------------------------------
def test_the_planner_by_hand():
    clock = FakeClock()
    planner = BudgetPlanner(60.0, max_steps=10_000, eval_interval=100, clock=clock)
    planner.start()
    plans = []
    for step in range(1, 101):
        clock.now += 0.125
        plans.append(planner.stepped(step, 0.125))
    # the first step is left out; the next PROBE_STEPS are the probe: at step 9, 58.875 s are left for steps of
    # 0.125 s (no evaluation measured yet): 471 more, 480 in all
    assert PROBE_STEPS == 8 and plans[:8] == [None] * 8
    first = plans[8]
    assert (first.step, first.steps, first.step_seconds, first.seconds_left) == (9, 480, 0.125, 58.875)
    # then re-planned after every twentieth of the steps left (471 // 20 = 23, then 22, 21, 20): at the same
    # speed, to the same end
    assert [p.step for p in plans if p is not None] == [9, 32, 54, 75, 95]
    assert {p.steps for p in plans if p is not None} == {480}
    clock.now += 1.0  # an evaluation (and its checkpoint) at step 100 takes a second
    plan = planner.evaluated(100, 1.0)
    # 46.5 s left: 340 more steps (42.5 s) and the evaluations at steps 200, 300, 400 and 440 (4 s) fill them
    # exactly; a 341st step would not fit
    assert (plan.steps, plan.eval_seconds, plan.seconds_left) == (440, 1.0, 46.5)


def test_the_planner_keeps_to_max_steps_and_says_when_the_budget_is_spent():
    clock = FakeClock()
    planner = BudgetPlanner(1.0, max_steps=12, eval_interval=100, clock=clock)
    planner.start()
    for step in range(1, 10):
        clock.now += 0.0625
        plan = planner.stepped(step, 0.0625)
    assert plan.steps == 12 and not planner.expired()  # 7 more steps would fit (16 in all); 12 are allowed
    clock.now += 0.4375 - 2**-20
    assert not planner.expired()
    clock.now += 2**-20
    assert planner.expired()


# ---- the trainer, planned ------------------------------------------------------------------------------------------
def test_the_budget_plans_replans_when_the_machine_slows_and_ends_at_min_lr(tiny_config):
    """7.5 s of budget; steps of 1/16 s, then 1/8 s from step 50 on (a core got busy); evaluations of 1/4 s."""
    clock = FakeClock()
    config = tiny_config(max_iters=100_000, time_budget=0.125, eval_interval=20, warmup_iters=100,
                         learning_rate=1e-3, min_lr=1e-4)
    trainer = TimedTrainer(config, quiet=True, clock=clock, step_seconds=lambda s: 0.0625 if s < 50 else 0.125,
                           eval_seconds=0.25)
    plans = []
    trainer.follow = lambda plan: plans.append(plan) or Trainer.follow(trainer, plan)
    start = clock.now
    result = trainer.train()
    used = clock.now - start
    # the probe's plan, by hand: 9 steps took 0.5625 s; 6.9375 s are left: 111 more steps of 1/16 s, 120 in all
    assert (plans[0].step, plans[0].steps, plans[0].step_seconds) == (9, 120, 0.0625)
    lrs = trainer.lrs
    assert lrs[:9] == [1e-3 * (s + 1) / 100 for s in range(9)]  # the probe warms up as configured ...
    assert lrs[9:12] == [1e-3 * (s + 1) / 12 for s in range(9, 12)]  # ... then over a tenth of the 120 steps
    # re-planned at every evaluation (steps 20, 40, 60) and every 8 steps in between: the first evaluation costs
    # time the probe could not see (step 20: 6 s left = 80 steps and evaluations at 40, 60, 80, 100: 100 in all);
    # the steps slow down from 50 on (step 56 measures a mix, step 60 the new speed: 2.375 s left = 17 steps of
    # 1/8 s and the last evaluation: 77 in all)
    assert [(p.step, p.steps) for p in plans] == [(9, 120), (17, 120), (20, 100), (28, 100), (36, 100), (40, 100),
                                                  (48, 100), (56, 80), (60, 77), (68, 77), (76, 77)]
    assert (plans[2].seconds_left, plans[8].seconds_left, plans[8].step_seconds) == (6.0, 2.375, 0.125)
    assert result.stop_reason == "time_budget" and result.step == 77
    assert used <= 7.5 < used + 0.125  # the budget is used, and not overrun: there was no time for one more step
    # the last step trains at min_lr exactly, and the rate never jumps up on the way there
    assert len(lrs) == result.step and result.last_lr == lrs[-1] == pytest.approx(1e-4, rel=1e-12)
    assert all(a >= b for a, b in itertools.pairwise(lrs[12:]))
    assert max(a - b for a, b in itertools.pairwise(lrs[12:])) < 0.1 * 1e-3


def test_steps_and_budget_together_whichever_ends_first(tiny_config):
    """A budget far longer than 30 steps: the steps end the run, and the cosine still ends at its last step."""
    clock = FakeClock()
    trainer = TimedTrainer(tiny_config(max_iters=30, time_budget=10.0, eval_interval=10), quiet=True, clock=clock,
                           step_seconds=lambda s: 0.1, eval_seconds=0.5)
    result = trainer.train()
    assert result.stop_reason == "max_iters" and result.step == 30
    assert trainer.lrs[-1] == result.last_lr == pytest.approx(1e-4, rel=1e-12)
    assert trainer.lrs[:2] == [1e-3 / 2, 1e-3]  # warm-up 2 steps, as configured (well under a tenth of 30)


def test_a_resumed_budget_goes_on_with_the_rest_of_its_cosine(tiny_config):
    clock = FakeClock()
    config = tiny_config(max_iters=100_000, time_budget=0.125, eval_interval=20)
    first = TimedTrainer(config, quiet=True, clock=clock, step_seconds=lambda s: 0.0625, eval_seconds=0.25)
    assert first.train(stop_at=30).stop_reason == "stop_at"
    resumed = TimedTrainer(config, resume=True, quiet=True, clock=clock, step_seconds=lambda s: 0.0625,
                           eval_seconds=0.25)
    assert resumed.learning_rate_at(30) == first.learning_rate_at(30) > 1e-4  # no jump at the resume
    result = resumed.train()
    assert result.stop_reason == "time_budget" and result.last_lr == pytest.approx(1e-4, rel=1e-12)
    assert result.step > 30 + 90  # a fresh 7.5 s budget


@pytest.mark.parametrize("schedule", ["cosine", "inverse-sqrt"])
def test_a_translation_run_plans_the_same_way(tmp_path, schedule):
    """The encoder-decoder's trainer plans with the same planner; the paper's schedule has no end to fit, so there
    the budget only decides where to stop."""
    clock = FakeClock()
    config = Seq2SeqTrainConfig(task="numbers", out=str(tmp_path / "run"), max_iters=100_000, batch_size=4,
                                eval_interval=20, eval_iters=1, train_pairs=50, val_pairs=10, warmup_iters=4,
                                time_budget=0.05, schedule=schedule,
                                model={"d_model": 16, "num_heads": 2, "num_encoder_layers": 1, "num_decoder_layers": 1,
                                       "d_ff": 32, "context_length": 24})
    trainer = TimedSeq2SeqTrainer(config, quiet=True, clock=clock, step_seconds=lambda s: 0.0625, eval_seconds=0.25)
    result = trainer.train()
    # 3 s: 40 steps of 1/16 s (2.5 s) and the evaluations at steps 20 and 40 (the last) fill them exactly
    assert result.stop_reason == "time_budget" and result.step == result.plan.steps == 40 and clock.now == 1003.0
    if schedule == "cosine":
        assert result.last_lr == pytest.approx(1e-4, rel=1e-12)
        assert trainer.schedule_shape() == "warm-up 4, the cosine ends at step 39"
    else:
        assert result.last_lr == inverse_sqrt_lr(39, 1e-3, 4)
        assert trainer.schedule_shape() == "the paper's schedule (warm-up 4, then 1/sqrt(step)): no end to fit"
