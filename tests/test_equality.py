"""Greedy equality up to near-ties: first divergence, margin there, the verdict."""

from types import SimpleNamespace

import pytest

from speclab.measure import equality


def _step(*logprobs):
    """One generated position as vLLM returns it: token id -> Logprob(logprob=...)."""
    return {tok: SimpleNamespace(logprob=lp) for tok, lp in enumerate(logprobs)}


def test_margin_is_top_one_minus_top_two_in_any_order():
    completion = SimpleNamespace(logprobs=[_step(-0.1, -2.6), _step(-3.0, -0.7, -1.2), _step(-0.5)])
    assert equality.top_two_margins(completion) == pytest.approx([2.5, 0.5, float("inf")])
    assert equality.top_two_margins(SimpleNamespace(logprobs=None)) == []


@pytest.mark.parametrize("a, b, expected", [
    ([1, 2, 3], [1, 2, 3], None),
    ([1, 2, 3], [1, 9, 3], 1),
    ([5, 2], [6, 2], 0),
    ([1, 2], [1, 2, 3], 2),  # one run stopped where the other went on
    ([], [], None),
])
def test_first_divergence(a, b, expected):
    assert equality.first_divergence(a, b) == expected


def test_near_tie_divergence_passes_and_a_clear_one_fails():
    base = [[1, 2, 3, 4], [7, 8, 9], [4, 4]]
    margins = [[3.0, 0.25, 2.0, 2.0], [5.0, 6.0, 4.0], [1.0, 1.0]]
    check = equality.compare(base, [[1, 2, 3, 4], [7, 5, 1], [4, 4]], margins)
    assert (check.identical, check.num_prompts, check.ok) == (2, 3, False)
    assert check.divergences == (equality.Divergence(prompt=1, position=1, margin=6.0),)
    with pytest.raises(AssertionError, match="prompt 1, token 1, margin 6.0"):
        check.require()

    tie = equality.compare(base, [[1, 3, 0, 0], [7, 8, 9], [4, 4]], margins)
    assert tie.ok and tie.identical == 2 and tie.divergences[0].margin == 0.25
    tie.require()  # rounding, not a bug
    assert "parted at near-ties only: prompt 0 at token 1 (margin 0.250)" in tie.describe()


def test_threshold_is_strict_and_unknown_margins_fail():
    at = equality.compare([[1, 2]], [[1, 3]], [[9.0, equality.NEAR_TIE]])
    assert not at.ok  # a margin of exactly the threshold is clear
    unknown = equality.compare([[1, 2]], [[1, 3]], None)
    assert unknown.divergences[0].margin is None and not unknown.ok
    assert "margin unknown" in unknown.describe()


def test_a_long_list_of_divergences_is_summarised_in_one_short_line():
    n = 115
    base = [[1, 2]] * n
    margins = [[0.5, 0.001 * p] for p in range(n)]
    check = equality.compare(base, [[1, 3]] * n, margins)
    assert check.ok
    assert check.describe() == ("0 of 115 outputs identical; parted at near-ties only: prompt 0 at token 1 "
                                "(margin 0.000), prompt 1 at token 1 (margin 0.001), prompt 2 at token 1 "
                                "(margin 0.002) and 112 more (115 in all, margins 0.000-0.114)")
    margins[100][1] = 5.0  # one clear divergence is named first
    clear = equality.compare(base, [[1, 3]] * n, margins)
    assert clear.describe().startswith("0 of 115 outputs identical; parted: prompt 100 at token 1 (margin 5.000), "
                                       "prompt 0 at token 1")


def test_outputs_of_different_prompt_counts_are_refused():
    with pytest.raises(ValueError, match="2 baseline outputs but 1"):
        equality.compare([[1], [2]], [[1]])


def test_margin_drift_compares_only_where_the_texts_agree():
    base = SimpleNamespace(token_ids=[[1, 2, 3], [4, 5]], margins=[[2.0, 0.5, 3.0], [1.0, float("inf")]])
    spec = SimpleNamespace(token_ids=[[1, 9, 9], [4, 5]], margins=[[2.25, 0.0, 0.0], [0.875, float("inf")]])
    assert equality.margin_drift(base, spec) == pytest.approx([0.25, 0.125])  # prompt 0 stops at its divergence
