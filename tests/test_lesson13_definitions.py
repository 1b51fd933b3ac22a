"""Lesson 13 writes the tree attention mask and tree verification out in its own cells (tagged
``define``); these tests hold them to ``speclab.algorithms.trees``.

The lesson's ``verify`` draws its random numbers in the package's order (one uniform per child
tried, then the closing sample), so for the same generator it must emit the same tokens as
``trees.verify`` on every tree shape and temperature; on top of that, the mask against one drawn
by hand, and the lesson's verifier keeping the target's exact distribution while a broken copy
(no residual after a rejection) fails the same check.
"""

import pytest
import torch
from notebook_defs import defining_cells

from speclab.algorithms import toy, trees

LESSON = "13"


@pytest.fixture(scope="module")
def pair():
    return toy.make_toy_pair(vocab_size=16, draft_noise=1.0, seed=2)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_mask_by_hand_and_against_the_package(lesson, pair):
    tree = trees.TokenTree((5, 7, 2, 9, 1), (-1, -1, 0, 2, 1))
    assert lesson["attention_mask"](tree).int().tolist() == [[1, 0, 0, 0, 0],
                                                             [0, 1, 0, 0, 0],
                                                             [1, 0, 1, 0, 0],
                                                             [1, 0, 1, 1, 0],
                                                             [0, 1, 0, 0, 1]]
    _, draft = pair
    for tree in (trees.dynamic_tree(draft, [3], 10, 3), trees.chain(draft, [3], 6),
                 trees.sampled_tree(draft, [3], (3, 2), 1.0, gen(0))):
        assert torch.equal(lesson["attention_mask"](tree), tree.attention_mask())


def shapes(draft, temperature, g):
    return [lambda c: trees.chain(draft, c, 5),
            lambda c: trees.dynamic_tree(draft, c, 9, 3),
            lambda c: trees.from_rank_paths(draft, c, trees.static_paths([0.5, 0.3, 0.1], 7)),
            lambda c: trees.sampled_tree(draft, c, (2, 2, 1), temperature, g)]


@pytest.mark.parametrize("temperature", [0.0, 0.6, 1.0, 1.7])
@pytest.mark.parametrize("shape", range(4))
def test_same_tokens_as_the_package(lesson, pair, temperature, shape):
    target, draft = pair
    for seed in range(3):
        build_g = gen(100 + seed)
        tree = shapes(draft, temperature, build_g)[shape]([seed % 16])
        mine, theirs = gen(seed), gen(seed)
        for _ in range(20):
            assert lesson["verify"](target, [seed % 16], tree, temperature, mine) == \
                trees.verify(target, [seed % 16], tree, temperature, theirs)
        assert torch.equal(mine.get_state(), theirs.get_state())


def test_the_lessons_verifier_keeps_the_distribution_and_a_broken_one_does_not(lesson, pair):
    target, draft = pair
    position, n = 1, 4000
    exact = toy.target_marginal(target, [0], position, 1.0)

    def run_with(verifier):
        def one_run(g):
            context = [0]
            while len(context) - 1 <= position:
                context += verifier(target, context, trees.sampled_tree(draft, context, (2, 1), 1.0, g), 1.0, g)[0]
            return context[1:]
        return toy.token_histogram(one_run, position, target.vocab_size, n, seed=7)

    freqs = run_with(lesson["verify"])
    assert toy.chi_square_pvalue(freqs, exact, n) > 1e-3

    broken = dict(lesson)
    exec(compile(defining_cells(LESSON)[-1].replace("remaining = toy.residual_distribution(remaining, q)",
                                                    "pass"), "<broken>", "exec"), broken)
    assert broken["verify"] is not lesson["verify"]
    assert toy.chi_square_pvalue(run_with(broken["verify"]), exact, n) < 1e-6
