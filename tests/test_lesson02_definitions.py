"""Lesson 02 writes prompt lookup and the replay that predicts vLLM's counters out in its own cells
(tagged ``define``); these tests hold them to ``speclab.algorithms.ngram_lookup`` (which lesson 14 reuses) on random
token sequences, by hand on the lesson's own example, and check that broken copies (the latest match
taken instead of the earliest; a step without a draft counted as a draft) are caught.
"""


import pytest
from notebook_defs import defining_cells, random_sequences

from speclab.algorithms import ngram_lookup
from speclab.algorithms.counters import SpecCounters

LESSON = "02"
VOCAB, MAX_LEN = 6, 60  # random token lists where n-grams repeat often


def test_the_lessons_example_by_hand(lesson):
    words = "the cat sat on the mat and the cat sat on the".split()
    assert lesson["propose"](words, k=3) == ["mat", "and", "the"]  # "the cat sat on the" occurred at the start
    assert lesson["propose"]("a b c x b c y b c".split(), k=2) == ["x", "b"]  # "b c" twice before: the earliest
    assert lesson["propose"]("a b c d".split(), k=3) == []  # nothing repeats: no draft


def test_a_replay_by_hand(lesson):
    # The prefill step writes 3: the context 1 2 3 1 2 3 ends with "1 2 3", seen at the start, so lookup
    # drafts what followed it, 1 2 3. The answer goes on 1 2 3 9: all three accepted, the target adds 9.
    counters = lesson["replay"]([1, 2, 3, 1, 2], [3, 1, 2, 3, 9], k=3)
    assert counters == SpecCounters(1, 3, 3, (1, 1, 1))
    assert counters == ngram_lookup.replay([1, 2, 3, 1, 2], [3, 1, 2, 3, 9], k=3)


@pytest.mark.parametrize("k, min_n, max_n", [(1, 1, 3), (3, 2, 5), (5, 3, 4), (4, 1, 1)])
def test_the_same_drafts_and_counters_as_the_package(lesson, k, min_n, max_n):
    seqs = random_sequences(80, VOCAB, MAX_LEN, seed=k * 10 + min_n)
    for tokens in seqs:
        assert lesson["propose"](tokens, k, min_n, max_n) == ngram_lookup.propose(tokens, k, min_n, max_n)
    drafted = 0
    for prompt, output in zip(seqs[::2], seqs[1::2]):
        mine = lesson["replay"](prompt, output, k, min_n, max_n)
        assert mine == ngram_lookup.replay(prompt, output, k, min_n, max_n)
        drafted += mine.num_drafts
    assert drafted > 50  # the comparison saw real drafts, not only empty ones


def broken(lesson: dict, cell: int, old: str, new: str) -> dict:
    """The lesson's definitions with one defining cell changed."""
    copy = dict(lesson)
    source = defining_cells(LESSON)[cell]
    assert old in source
    exec(compile(source.replace(old, new), "<broken>", "exec"), copy)
    return copy


def test_broken_copies_are_caught(lesson):
    latest = broken(lesson, 0, "range(0, total - n)", "reversed(range(0, total - n))")
    seqs = random_sequences(80, VOCAB, MAX_LEN, seed=3)
    assert any(latest["propose"](t, 3) != ngram_lookup.propose(t, 3) for t in seqs)
    every_step = broken(lesson, 1, "if guess:", "if True:")
    assert any(every_step["replay"](p, o, 3) != ngram_lookup.replay(p, o, 3) for p, o in zip(seqs[::2], seqs[1::2]))
