"""The plain-Python prompt lookup on cases worked out by hand."""

from speclab.lookup import propose, replay


def test_propose_longest_then_earliest():
    #         0  1  2  3  4  5  6  7  8  9
    tokens = [1, 2, 3, 9, 1, 2, 3, 8, 1, 2, 3]
    # suffix [1,2,3] matches at 0 and 4: the earliest (0) wins -> next tokens 9, 1
    assert propose(tokens, k=2, min_n=2, max_n=3) == [9, 1]
    assert propose([5, 6, 7], k=2) == []                   # nothing repeats
    assert propose([4, 5, 4, 5], k=3, min_n=2, max_n=2) == [4, 5]  # draft cut by the context end


def test_replay_by_hand():
    prompt = [1, 2, 3, 4]
    output = [1, 2, 3, 4, 7]
    # step 1: context ends "3 4" -> no earlier "3 4"; min_n=2 -> no draft, emit 1
    # step 2: context ...4 1; "4 1" absent; no draft, emit 2
    # step 3: context ...4 1 2 -> "1 2" matches at 0 -> draft [3, 4, 1], capped to the 2 tokens that
    #         max_tokens still allows after this step's own token; truth 3 4 -> both accepted, then 7
    c = replay(prompt, output, k=3, min_n=2, max_n=3)
    assert (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, c.accepted_per_pos) == (1, 2, 2, (1, 1, 0))
    assert c.acceptance_length == 3.0
