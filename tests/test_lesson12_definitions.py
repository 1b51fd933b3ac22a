"""Lesson 12 writes the step-cost fit and its leave-one-out check out in its own cells (tagged
``define``); these tests hold them to ``theory.fit_step_cost``, ``synthetic.step_costs`` and
``synthetic.speedup_table`` on the stored GPU sweep the lesson reads, and check that a broken copy
(a fit that keeps the run it predicts) is caught by the same comparison.
"""

import pytest
from notebook_defs import defining_cells

from speclab.algorithms import theory
from speclab.measure import synthetic

LESSON = "12"


@pytest.fixture(scope="module")
def surface() -> dict:
    return synthetic.load_reference("speedup_surface")


def test_the_fit_by_hand(lesson):
    cost = lesson["fit_step_cost"]([1, 2, 3], [2.0, 3.0, 5.0], t_target=1.0)
    assert (cost.t_draft, cost.t_fixed) == pytest.approx((1.5, 1 / 3))  # mean k 2, mean t 10/3
    exact = lesson["fit_step_cost"]([1, 2, 4], [6.5 + 1.4 * k for k in (1, 2, 4)], t_target=5.07)
    assert (exact.t_fixed, exact.t_draft, exact.t_target) == pytest.approx((6.5, 1.4, 5.07))


def test_the_fits_equal_the_packages(lesson, surface):
    for view in (surface, synthetic.fastest_engines(surface)):
        mine, theirs = lesson["step_costs"](view), synthetic.step_costs(view)
        assert mine == theirs  # the same arithmetic in the same order: equal to the last bit
        label = synthetic.runs(view, method="draft_model")[0]["label"]
        assert lesson["step_costs"](view, leave_out=label) == synthetic.step_costs(view, leave_out=label)


def test_the_leave_one_out_table_equals_the_packages(lesson, surface):
    fast = synthetic.fastest_engines(surface)
    assert lesson["leave_one_out"](fast) == synthetic.speedup_table(fast)
    assert lesson["leave_one_out"](surface, fit=fast) == synthetic.speedup_table(surface, fit=fast)
    assert len(lesson["leave_one_out"](fast)) == len(synthetic.runs(surface, method="draft_model"))


def test_a_fit_that_keeps_the_run_it_predicts_is_caught(lesson, surface):
    broken = dict(lesson)
    source = defining_cells(LESSON)[0].replace('if r["label"] != leave_out', "")
    exec(compile(source, "<broken>", "exec"), broken)
    exec(compile(defining_cells(LESSON)[1], "<broken>", "exec"), broken)
    assert broken["step_costs"] is not lesson["step_costs"]
    fast = synthetic.fastest_engines(surface)
    assert broken["leave_one_out"](fast) != synthetic.speedup_table(fast)
    # and the package's fit of every run really is the broken one's
    assert broken["step_costs"](fast, leave_out="any") == synthetic.step_costs(fast)
    assert isinstance(broken["step_costs"](fast)[1], theory.StepCost)
