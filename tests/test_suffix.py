"""Suffix decoding from scratch: the tree's counts, the draft rule, and a replay worked by hand."""

import pytest

from speclab.algorithms.counters import SpecCounters
from speclab.algorithms.suffix import SuffixCache, SuffixTree, replay_requests


def test_the_tree_counts_every_window_up_to_its_depth():
    tree = SuffixTree(max_depth=3)
    tree.append("a", [1, 2, 3, 1, 2, 4])
    assert {t: n.count for t, n in tree.root.children.items()} == {1: 2, 2: 2, 3: 1, 4: 1}
    assert tree.find([1, 2]).count == 2 and tree.find([1, 2, 3]).count == 1 and tree.find([2, 3, 1]).count == 1
    assert tree.find([1, 2, 3, 1]) is None  # longer than the depth
    assert tree.find([2, 1]) is None  # never seen
    piecewise = SuffixTree(max_depth=3)
    for part in ([1, 2], [3], [], [1, 2, 4]):  # a response arrives a few tokens at a time
        piecewise.append("a", part)
    piecewise.append("b", [2, 4])  # another sequence does not continue the first one's windows
    assert tree.find([1, 2, 4]).count == piecewise.find([1, 2, 4]).count == 1
    assert piecewise.find([2, 4]).count == 2 and piecewise.find([4, 2]) is None
    with pytest.raises(ValueError):
        SuffixTree(max_depth=0)


def test_a_draft_follows_the_most_frequent_child_as_far_as_the_match_earns():
    tree = SuffixTree()
    tree.append("a", [5, 6, 7, 8, 9])
    tree.append("b", [5, 6, 7, 8, 9])
    draft = tree.speculate([1, 5, 6, 7], max_tokens=24)
    assert (draft.tokens, draft.probs, draft.match_length) == ([8, 9], [1.0, 1.0], 3)
    assert tree.speculate([1, 5, 6, 7], max_tokens=1).tokens == [8]
    assert tree.speculate([9, 7], max_tokens=24).tokens == [8]  # a 1-token match earns 1 token (factor 1)
    assert tree.speculate([9, 7], max_tokens=24, max_spec_factor=2.0).tokens == [8, 9]
    assert tree.speculate([4, 3], max_tokens=24).tokens == []  # nothing matches


def test_a_draft_stops_where_its_probability_falls_below_the_floor():
    tree = SuffixTree()
    for name in range(9):
        tree.append(name, [1, 2, 3])
    tree.append("odd", [1, 2, 4])
    draft = tree.speculate([0, 0, 1], max_tokens=24, max_spec_factor=3.0)
    assert draft.tokens == [2, 3] and draft.probs == [1.0, pytest.approx(0.9)]
    assert tree.speculate([0, 0, 1], 24, 3.0, min_token_prob=0.95).tokens == [2]


def test_replay_of_a_repeated_request_worked_by_hand():
    """The second time, the answer is drafted from the first: 1 token, then 3 (match of 3), then the last 3."""
    prompt, output = [1, 2, 3], list(range(10, 20))
    first, second = replay_requests([(prompt, output), (prompt, output)], k=24)
    assert first == SpecCounters(0, 0, 0, (0,) * 24)  # nothing written before, and the answer never repeats
    assert second == SpecCounters(3, 7, 7, (3, 2, 2) + (0,) * 21)
    assert second.acceptance_length == pytest.approx(1 + 7 / 3)


def test_the_prompt_tree_drafts_what_the_prompt_holds():
    cache = SuffixCache()
    request = cache.start("r", [7, 8, 9, 10, 11, 12], k=4)
    assert request.draft([7, 8, 9, 10, 11, 12, 7, 8]) == [9, 10]  # a 2-token match earns 2 tokens
    assert cache.responses.find([7, 8]).count == 1  # the response so far was filed, not the prompt


def test_drafts_match_arctic_inference_token_for_token():
    """The reference: vLLM's suffix method runs Arctic Inference's C++ tree. Same requests, same drafts."""
    arctic = pytest.importorskip("arctic_inference.suffix_decoding", reason="make suffix installs arctic-inference")
    import random

    import numpy as np

    rng = random.Random(0)
    compared = 0
    for trial in range(60):
        depth, vocab = rng.choice([4, 8, 24]), rng.choice([20, 50, 1000])
        reference = arctic.SuffixDecodingCache(max_tree_depth=depth, max_cached_requests=1000)
        ours = SuffixCache(max_depth=depth)
        previous: list[int] = []
        for r in range(4):  # later requests draft from the earlier answers too
            prompt = [rng.randrange(vocab) for _ in range(rng.randrange(1, 30))]
            answer = [rng.randrange(vocab) for _ in range(rng.randrange(1, 40))]
            if r % 2:  # an answer that repeats an earlier one, so that the shared tree drafts long
                answer = answer[:5] + previous
            reference.start_request(r, np.array(prompt, dtype=np.int32))
            request = ours.start(r, prompt, k=8)
            for t in range(1, len(answer) + 1):
                reference.add_active_response(r, answer[t - 1:t])
                context = prompt + answer[:t]
                expected = reference.speculate(r, np.array(context[-depth:], dtype=np.int32), max_spec_tokens=8,
                                               max_spec_factor=1.0, min_token_prob=0.1)
                assert request.draft(context) == list(expected.token_ids), (trial, r, t)
                compared += 1
            reference.stop_request(r)
            previous = answer
    assert compared > 2000
