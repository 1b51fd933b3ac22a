"""The formulas against hand-computed values and against each other."""

import pytest

from speclab.algorithms import theory


def test_expected_tokens_by_hand():
    assert theory.expected_tokens_per_step(0.5, 2) == pytest.approx(1.75)      # 1 + .5 + .25
    assert theory.expected_tokens_per_step(0.8, 3) == pytest.approx(2.952)     # 1 + .8 + .64 + .512
    assert theory.expected_tokens_per_step(0.0, 5) == 1.0
    assert theory.expected_tokens_per_step(1.0, 4) == 5.0


def test_speedup_and_best_k():
    assert theory.speedup(0.8, 3, 0.1) == pytest.approx(2.952 / 1.3)
    assert theory.speedup(0.0, 3, 0.1) < 1.0  # a useless drafter is pure cost
    assert theory.best_k(0.8, 0.05) > theory.best_k(0.5, 0.05)
    assert theory.best_k(0.3, 0.5) == 1
    # best_k really is the argmax
    a, c = 0.7, 0.1
    k = theory.best_k(a, c, k_max=12)
    assert all(theory.speedup(a, k, c) >= theory.speedup(a, j, c) for j in range(1, 13))


def test_inversions():
    for a in (0.2, 0.6, 0.9):
        assert theory.acceptance_from_length(theory.expected_tokens_per_step(a, 4), 4) == pytest.approx(a, abs=1e-9)
        assert theory.acceptance_from_positions(theory.predicted_positions(a, 5)) == pytest.approx(a)
    assert theory.acceptance_from_positions([0.0, 0.0]) == 0.0
    with pytest.raises(ValueError):
        theory.acceptance_from_length(5.0, 3)


def test_rule_of_thumb():
    assert theory.rule_of_thumb(0.75) == "raise k"
    assert theory.rule_of_thumb(0.45).startswith("lower k")
    assert theory.rule_of_thumb(0.6) == "keep k"
