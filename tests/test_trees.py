"""Token trees: structure and masks by hand, tree shapes, greedy equality, the exact distribution
under tree verification (and typical acceptance failing that same check), acceptance formulas."""

import math

import pytest
import torch

from speclab.algorithms import theory, toy, trees


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def pair():
    return toy.make_toy_pair(vocab_size=16, draft_noise=1.0, seed=0)


# --------------------------------------------------------------------------- structure


def test_tree_structure_by_hand():
    #        root
    #       /    \
    #     5 (0)   7 (1)
    #     |
    #     2 (2)
    #     |
    #     9 (3)
    tree = trees.TokenTree((5, 7, 2, 9), (-1, -1, 0, 2))
    assert tree.size == 4 and tree.depth == 3
    assert tree.children(-1) == [0, 1] and tree.children(0) == [2] and tree.children(1) == []
    assert tree.path(3) == [5, 2, 9] and tree.path(1) == [7]
    assert tree.attention_mask().int().tolist() == [[1, 0, 0, 0],
                                                    [0, 1, 0, 0],
                                                    [1, 0, 1, 0],
                                                    [1, 0, 1, 1]]
    onehot = tree.proposal(1, 10)
    assert onehot.tolist() == [0.0] * 7 + [1.0, 0.0, 0.0]


def test_a_chains_mask_is_the_causal_mask(pair):
    _, draft = pair
    chain = trees.chain(draft, [3], 5)
    assert chain.parents == (-1, 0, 1, 2, 3) and chain.depth == 5
    assert torch.equal(chain.attention_mask(), torch.tril(torch.ones(5, 5, dtype=torch.bool)))
    # the draft's greedy text, token by token
    ctx = [3]
    for token in chain.tokens:
        assert token == int(draft.next_token_probs(ctx, 1.0).argmax())
        ctx.append(token)


@pytest.mark.parametrize("tokens, parents", [((1, 2), (-1,)), ((1, 2), (-1, 1)), ((1, 2), (0, -1)), ((1,), (-2,))])
def test_malformed_trees_are_refused(tokens, parents):
    with pytest.raises(ValueError):
        trees.TokenTree(tokens, parents)


def test_best_first_by_hand():
    # rank 0 right 60% of the time, rank 1 30%: path scores (0,) .6, (0,0) .36, (1,) .3, (0,0,0) .216, (0,1) .18
    paths = trees.static_paths([0.6, 0.3], 4)
    assert paths == [(0,), (0, 0), (1,), (0, 0, 0)]
    assert trees.expected_tokens(paths, [0.6, 0.3]) == pytest.approx(1 + 0.6 + 0.36 + 0.3 + 0.216)
    with pytest.raises(ValueError):
        trees.best_first(0, 2, lambda path: [1.0])


@pytest.mark.parametrize("a, k", [(0.0, 3), (0.5, 1), (0.8, 4), (1.0, 5)])
def test_a_chains_expected_tokens_are_the_chain_formula(a, k):
    chain = [(0,) * d for d in range(1, k + 1)]
    assert trees.expected_tokens(chain, [a, 0.1]) == pytest.approx(theory.expected_tokens_per_step(a, k))


def test_rank_paths_name_the_drafts_choices(pair):
    _, draft = pair
    tree = trees.from_rank_paths(draft, [4], [(0,), (1,), (0, 2)])
    first, _ = trees.ranked(draft, [4])
    assert tree.tokens[:2] == (first[0], first[1])
    assert tree.tokens[2] == trees.ranked(draft, [4, first[0]])[0][2] and tree.parents == (-1, -1, 0)
    with pytest.raises(ValueError, match="no parent"):
        trees.from_rank_paths(draft, [4], [(0,), (1, 1)])


def test_dynamic_tree_keeps_the_drafts_surest_paths(pair):
    """Best-first: every path in the tree scores at least as high as any top-k child left out."""
    _, draft = pair
    context, top_k = [2], 3
    tree = trees.dynamic_tree(draft, context, budget=6, top_k=top_k)
    assert tree.size == 6

    def path_score(tokens):
        ctx, total = list(context), 1.0
        for token in tokens:
            total *= float(draft.next_token_probs(ctx, 1.0)[token])
            ctx.append(token)
        return total

    kept = [path_score(tree.path(i)) for i in range(tree.size)]
    left_out = []
    for node in [-1, *range(tree.size)]:
        prefix = tree.path(node) if node >= 0 else []
        present = {tree.tokens[c] for c in tree.children(node)}
        left_out += [path_score(prefix + [t]) for t in trees.ranked(draft, context + prefix)[0][:top_k]
                     if t not in present]
    assert min(kept) >= max(left_out) - 1e-12
    assert tree.tokens[0] == trees.ranked(draft, context)[0][0]


def test_sampled_tree_shape_and_proposals(pair):
    _, draft = pair
    tree = trees.sampled_tree(draft, [1], (2, 1, 1), 1.0, gen(0))
    assert tree.size == 6 and tree.depth == 3 and tree.parents == (-1, -1, 0, 1, 2, 3)
    assert torch.equal(tree.proposal(0, 16), draft.next_token_probs([1], 1.0))
    assert torch.equal(tree.proposal(3, 16), draft.next_token_probs([1, tree.tokens[1]], 1.0))


# --------------------------------------------------------------------------- verification


def builders(draft, temperature, generator_box):
    return {
        "chain": lambda c: trees.chain(draft, c, 4),
        "static": lambda c: trees.from_rank_paths(draft, c, trees.static_paths([0.6, 0.2, 0.1], 8)),
        "dynamic": lambda c: trees.dynamic_tree(draft, c, 8, 3),
        "sampled": lambda c: trees.sampled_tree(draft, c, (2, 1, 1), temperature, generator_box[0]),
    }


@pytest.mark.parametrize("shape", ["chain", "static", "dynamic", "sampled"])
def test_greedy_tree_speculation_is_the_targets_greedy_text(pair, shape):
    target, draft = pair
    box = [gen(0)]
    for prompt in ([0], [5], [9, 3]):
        plain = toy.generate_plain(target, prompt, 40, temperature=0.0)
        spec, stats = trees.generate(target, builders(draft, 0.0, box)[shape], prompt, 40, 0.0, box[0])
        assert spec == plain
        assert stats.steps < 40  # some drafts were accepted


def test_ranked_children_are_accepted_with_the_targets_probability():
    """One level of ranked children: P(emit child i) = p(child i), and the rest follows p too."""
    target = toy.ToyModel(torch.log(torch.tensor([[0.5, 0.3, 0.2]] * 3, dtype=torch.float64)))
    tree = trees.TokenTree((1, 0), (-1, -1))  # ranked candidates 1 then 0
    counts = torch.zeros(3, dtype=torch.float64)
    g, n = gen(0), 20000
    for _ in range(n):
        emitted, accepted = trees.verify(target, [2], tree, 1.0, g)
        counts[emitted[0]] += 1
        assert len(emitted) == accepted + 1 and accepted <= 1
    assert toy.chi_square_pvalue(counts / n, torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64), n) > 1e-3


@pytest.mark.parametrize("shape", ["static", "dynamic", "sampled"])
def test_tree_verification_keeps_the_targets_distribution(pair, shape):
    """The token at position 2 follows the target's exact marginal (chi-square), as plain sampling does."""
    target, draft = pair
    position, n = 2, 4000
    exact = toy.target_marginal(target, [0], position, 1.0)
    box = [None]

    def run(g):
        box[0] = g
        return trees.generate(target, builders(draft, 1.0, box)[shape], [0], position + 1, 1.0, g)[0]

    freqs = toy.token_histogram(run, position, target.vocab_size, n, seed=11)
    assert toy.chi_square_pvalue(freqs, exact, n) > 1e-3
    assert toy.tv_distance(freqs, exact) < 0.05


def test_typical_acceptance_fails_the_same_check_and_accepts_more(pair):
    target, draft = pair
    position, n = 2, 4000
    exact = toy.target_marginal(target, [0], position, 1.0)
    build = builders(draft, 1.0, [None])["dynamic"]
    freqs = toy.token_histogram(lambda g: trees.generate(target, build, [0], position + 1, 1.0, g,
                                                         trees.typical_verify)[0],
                                position, target.vocab_size, n, seed=11)
    assert toy.chi_square_pvalue(freqs, exact, n) < 1e-6 and toy.tv_distance(freqs, exact) > 0.1
    exact_len = trees.generate(target, build, [0], 600, 1.0, gen(1))[1].acceptance_length
    typical_len = trees.generate(target, build, [0], 600, 1.0, gen(1), trees.typical_verify)[1].acceptance_length
    assert typical_len > exact_len


def test_typical_acceptance_threshold_by_hand():
    """p = [0.7, 0.2, 0.1]: H = 0.8018 nats, delta * exp(-H) = 0.3 * 0.4485 = 0.1346 > epsilon 0.09,
    so the threshold is 0.09: token 2 (0.1) passes, a token with 0.05 would not."""
    p = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    entropy = -float((p * p.log()).sum())
    assert entropy == pytest.approx(0.8018, abs=1e-4)
    target = toy.ToyModel(torch.log(torch.stack([p] * 3)))
    emitted, accepted = trees.typical_verify(target, [0], trees.TokenTree((2,), (-1,)), 1.0, gen(0))
    assert accepted == 1 and emitted[0] == 2
    low = toy.ToyModel(torch.log(torch.tensor([[0.85, 0.1, 0.05]] * 3, dtype=torch.float64)))
    # H = 0.5182, 0.3 * exp(-H) = 0.1787: threshold 0.09; token 2 (0.05) fails, the step samples from p
    assert trees.typical_verify(low, [0], trees.TokenTree((2,), (-1,)), 1.0, gen(0))[1] == 0


def test_stats_count_every_node_as_a_draft_token(pair):
    target, draft = pair
    _, stats = trees.generate(target, lambda c: trees.dynamic_tree(draft, c, 8, 3), [0], 200, 1.0, gen(0))
    assert stats.k == 8
    assert stats.counters.num_draft_tokens == 8 * stats.steps
    assert 1.0 <= stats.acceptance_length <= 9.0
    assert sum(stats.tokens_per_step) >= 200


# --------------------------------------------------------------------------- how a draft is picked


def two_token_pair():
    """A hand-made pair over two tokens. Target after token 0: [0.8, 0.2]; after token 1: [0.4, 0.6].
    Draft after 0: [0.6, 0.4]; after 1: [0.7, 0.3] (its argmax is token 0 after both)."""
    p = torch.tensor([[0.8, 0.2], [0.4, 0.6]], dtype=torch.float64)
    q = torch.tensor([[0.6, 0.4], [0.7, 0.3]], dtype=torch.float64)
    return toy.ToyModel(p.log()), toy.ToyModel(q.log())


def test_visits_and_acceptance_by_hand():
    target, draft = two_token_pair()
    # stationary distribution of [[.8, .2], [.4, .6]]: pi0 * 0.2 = pi1 * 0.4 -> (2/3, 1/3)
    assert trees.visits(target, 1.0, steps=4000).tolist() == pytest.approx([2 / 3, 1 / 3], abs=1e-3)
    acc = trees.drafting_acceptance(target, draft, 1.0)
    # sampled: sum(min(p, q)) = 0.6 + 0.2 = 0.8 after 0, 0.4 + 0.3 = 0.7 after 1
    assert acc["sampled"] == pytest.approx(2 / 3 * 0.8 + 1 / 3 * 0.7, abs=1e-3)
    # greedy: the draft proposes token 0 after both: p = 0.8 after 0, 0.4 after 1
    assert acc["greedy"] == pytest.approx(2 / 3 * 0.8 + 1 / 3 * 0.4, abs=1e-3)
    # rank 0 is token 0 after both (as above), rank 1 token 1: 0.2 after 0, 0.6 after 1
    assert trees.rank_accuracy(target, draft, 2, 1.0) == pytest.approx([2 / 3 * 0.8 + 1 / 3 * 0.4,
                                                                        2 / 3 * 0.2 + 1 / 3 * 0.6], abs=1e-3)


def test_greedy_and_sampled_drafting_agree_at_temperature_zero(pair):
    target, draft = pair
    acc = trees.drafting_acceptance(target, draft, 0.0)
    assert acc["sampled"] == pytest.approx(acc["greedy"])
    assert sum(trees.rank_accuracy(target, draft, target.vocab_size, 0.5)) == pytest.approx(1.0)


def test_sampled_chain_measures_what_sampled_drafting_predicts(pair):
    """One sampled draft token per step: the first position's measured rate is the predicted chance,
    averaged over the tokens the steps start from (close to the target's visits over a long run)."""
    target, draft = pair
    g = gen(5)
    _, stats = trees.generate(target, lambda c: trees.sampled_tree(draft, c, (1,), 1.0, g), [0], 6000, 1.0, g)
    predicted = trees.drafting_acceptance(target, draft, 1.0)["sampled"]
    assert stats.per_position_rates[0] == pytest.approx(predicted, abs=0.04)
    assert math.isfinite(stats.acceptance_length)
