"""The plain-Python prompt lookup on cases worked out by hand."""

from speclab.algorithms.ngram_lookup import propose, replay


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
    # token 1 comes from prefill, undrafted; context is now 1 2 3 4 1
    # step: "4 1" / "3 4 1" occur nowhere earlier -> no draft, emit 2
    # step: context ends "1 2", found at 0 -> draft [3, 4, 1]; truth 3 4 7 -> 2 accepted, then 7
    c = replay(prompt, output, k=3, min_n=2, max_n=3)
    assert (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, c.accepted_per_pos) == (1, 3, 2, (1, 1, 0))
    assert c.acceptance_length == 3.0


def test_replay_repeating_text_by_hand():
    prompt = [5, 6, 7, 8, 9, 5, 6, 7]
    output = [8, 9, 5, 6, 7, 8, 2]
    # 8 from prefill. Context ...5 6 7 8: "5 6 7 8" (n=4) first at 0 -> draft 9 5 6; truth 9 5 6 -> 3 accepted, +7
    # context ends "8 9 5 6 7" (n=5), first at 3 -> draft 8 9 5; truth 8 2 -> 1 accepted, +2; done
    c = replay(prompt, output, k=3, min_n=2, max_n=5)
    assert (c.num_drafts, c.num_draft_tokens, c.num_accepted_tokens, c.accepted_per_pos) == (2, 6, 4, (2, 1, 1))
