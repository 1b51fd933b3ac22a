"""What every lesson that teaches an algorithm owes its learners: the algorithm written out in its own cells
(tagged ``define``), cells that hold only imports and definitions, and functions that are the lesson's own
rather than the package's under the same names. Each lesson's own file holds its code to the package's twin.
"""

import pytest
from notebook_defs import defining_cells, lesson_definitions, not_definitions, not_the_lessons_own

# lesson -> (at least this many defining cells, the names it teaches)
TAUGHT = {
    "01": (5, ("sample", "draft_tokens", "verify", "residual_distribution", "speculative_step",
               "generate_speculative", "greedy_step")),
    "02": (2, ("propose", "replay")),
    "12": (2, ("fit_step_cost", "step_costs", "leave_one_out")),
    "13": (2, ("attention_mask", "verify")),
    "14": (2, ("SuffixTree", "walk", "replay_requests")),
}


@pytest.mark.parametrize("lesson", TAUGHT)
def test_defining_cells_hold_only_imports_and_definitions(lesson):
    assert len(defining_cells(lesson)) >= TAUGHT[lesson][0]
    assert not_definitions(lesson) == []


@pytest.mark.parametrize("lesson", TAUGHT)
def test_the_lesson_defines_what_it_teaches_itself(lesson):
    assert not_the_lessons_own(lesson_definitions(lesson), lesson, TAUGHT[lesson][1]) == []


def test_lesson_01_builds_speculative_decoding_without_the_package():
    assert not any("speclab" in source for source in defining_cells("01"))
