"""Lesson 14 writes the suffix tree, its drafts and the replay over served requests out in its own
cells (tagged ``define``); these tests hold them to ``speclab.algorithms.suffix`` (whose tree is checked against
Arctic Inference's in test_suffix.py) on random token sequences, by hand on the lesson's example, and
check that a broken copy (a draft as long as allowed, whatever the match earned) is caught.
"""


import pytest
from notebook_defs import defining_cells, random_sequences

from speclab.algorithms import suffix

LESSON = "14"
VOCAB, MAX_LEN = 5, 40  # random token lists where n-grams repeat often


def test_the_lessons_example_by_hand(lesson):
    tree = lesson["SuffixTree"](max_depth=6)
    tree.append("answer 1", "call get_weather with city Rome and unit celsius".split())
    tree.append("answer 2", "call get_weather with city Oslo and unit fahrenheit".split())
    node = tree.find(["city"])
    assert node.count == 2 and {w: c.count for w, c in node.children.items()} == {"Rome": 1, "Oslo": 1}
    assert tree.speculate("now call get_weather".split(), 24).tokens == ["with", "city"]  # 2 matched: 2 drafted
    assert tree.speculate("with city Lima and".split(), 24).tokens == ["unit"]
    draft = tree.speculate("with city".split(), 24)
    assert (draft.tokens, draft.probs) == (["Rome"], [0.5])  # a tie: the one seen first


@pytest.mark.parametrize("max_depth, max_tokens, factor, min_prob", [(24, 24, 1.0, 0.1), (6, 4, 2.0, 0.2),
                                                                      (3, 8, 0.5, 0.0)])
def test_the_same_drafts_as_the_package(lesson, max_depth, max_tokens, factor, min_prob):
    mine, theirs = lesson["SuffixTree"](max_depth), suffix.SuffixTree(max_depth)
    drafted = 0
    for i, tokens in enumerate(random_sequences(40, VOCAB, MAX_LEN, seed=max_depth)):
        mine.append(i % 7, tokens)
        theirs.append(i % 7, tokens)
        for end in range(1, len(tokens) + 1):
            context = tokens[:end]
            got = mine.speculate(context, max_tokens, factor, min_prob)
            assert got == theirs.speculate(context, max_tokens, factor, min_prob)
            drafted += len(got.tokens)
    assert drafted > 100  # the comparison saw real drafts


def test_the_same_replay_as_the_package(lesson):
    seqs = random_sequences(30, VOCAB, MAX_LEN, seed=5)
    requests = list(zip(seqs[::2], seqs[1::2]))
    for k in (1, 3, 24):
        mine = lesson["replay_requests"](requests, k)
        assert mine == suffix.replay_requests(requests, k)
        assert sum(c.num_drafts for c in mine) > 10


def test_a_draft_longer_than_its_match_earned_is_caught(lesson):
    broken = dict(lesson)
    source = defining_cells(LESSON)[0]
    old = "budget = min(max_tokens, int(length * max_spec_factor + 1e-6))"
    assert old in source
    exec(compile(source.replace(old, "budget = max_tokens"), "<broken>", "exec"), broken)
    mine, theirs = broken["SuffixTree"](), suffix.SuffixTree()
    differ = False
    for i, tokens in enumerate(random_sequences(20, VOCAB, MAX_LEN, seed=9)):
        mine.append(i, tokens)
        theirs.append(i, tokens)
        differ |= any(mine.speculate(tokens[:e], 24) != theirs.speculate(tokens[:e], 24)
                      for e in range(1, len(tokens) + 1))
    assert differ
