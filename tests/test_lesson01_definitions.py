"""Lesson 01 writes the speculative step out in its own cells (tagged ``define``); these tests hold
those functions to ``speclab.algorithms.toy``.

The lesson's functions draw their random numbers in the package's order (one uniform per sampled
token, the k acceptance uniforms in one call after drafting, then the residual or bonus sample), so
for the same generator they must emit the *same tokens* as ``toy.speculative_step`` and
``toy.generate_speculative``, not only the same distribution. On top of that: the residual by hand,
the output distribution against the target's exact marginal (with wrong residuals failing the very
same check), and greedy decoding giving the target's greedy text.
"""

import itertools

import pytest
import torch

from speclab.algorithms import toy

LESSON = "01"


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def wrong_q(p, q):
    return q  # after a rejection, draw again from the draft


def wrong_p(p, q):
    return p  # after a rejection, draw from the target


# --------------------------------------------------------------------------- the cells themselves


def test_later_cells_demonstrate_with_the_lessons_functions():
    import nbformat
    from notebook_defs import NOTEBOOKS, TAG

    nb = nbformat.read(next(NOTEBOOKS.glob(f"{LESSON}*.ipynb")), as_version=4)
    demo = "\n".join(c.source for c in nb.cells if c.cell_type == "code" and TAG not in c.metadata.get("tags", []))
    for name in ("speculative_step", "generate_speculative", "residual_distribution"):
        assert f"toy.{name}" not in demo, name
        assert f"{name}(" in demo or f"={name}" in demo, name


# --------------------------------------------------------------------------- building blocks


def test_residual_by_hand(lesson):
    residual = lesson["residual_distribution"]
    p = torch.tensor([0.4, 0.4, 0.2], dtype=torch.float64)
    q = torch.tensor([0.1, 0.3, 0.6], dtype=torch.float64)
    # max(0, p - q) = [0.3, 0.1, 0] -> divided by 0.4: [0.75, 0.25, 0]
    assert residual(p, q).tolist() == pytest.approx([0.75, 0.25, 0.0], abs=1e-12)
    assert torch.equal(residual(p, q), toy.residual_distribution(p, q))
    p2 = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q2 = torch.tensor([0.2, 0.6, 0.2], dtype=torch.float64)
    assert residual(p2, q2).tolist() == pytest.approx([1.0, 0.0, 0.0], abs=1e-12)
    assert torch.equal(residual(p, p), p) and torch.equal(toy.residual_distribution(p, p), p)  # nothing to reject


def test_residual_matches_package_on_random_pairs(lesson):
    g = gen(3)
    for size in (2, 5, 12):
        for _ in range(30):
            p = torch.softmax(2 * torch.randn(size, generator=g, dtype=torch.float64), 0)
            q = torch.softmax(2 * torch.randn(size, generator=g, dtype=torch.float64), 0)
            assert torch.equal(lesson["residual_distribution"](p, q), toy.residual_distribution(p, q))


def test_one_position_emits_exactly_p_with_the_lessons_residual(lesson):
    """P(x) = q(x) min(1, p(x)/q(x)) + P(reject) r(x) = p(x); a q-only resample breaks it."""
    g = gen(4)
    for _ in range(20):
        p = torch.softmax(2 * torch.randn(9, generator=g, dtype=torch.float64), 0)
        q = torch.softmax(2 * torch.randn(9, generator=g, dtype=torch.float64), 0)
        accepted = q * torch.clamp(p / q, max=1.0)
        reject = 1 - accepted.sum()
        assert torch.allclose(accepted + reject * lesson["residual_distribution"](p, q), p, atol=1e-12)
        assert toy.tv_distance(accepted + reject * q, p) > 0.01


def test_sample_draws_what_the_package_draws(lesson):
    g = gen(5)
    vectors = [torch.softmax(3 * torch.randn(12, generator=g, dtype=torch.float64), 0) for _ in range(20)]
    vectors += [torch.nn.functional.one_hot(torch.tensor(i), 7).double() for i in range(7)]
    vectors += [torch.tensor([0.0, 0.5, 0.0, 0.5, 0.0], dtype=torch.float64)]
    for probs in vectors:
        mine, theirs = gen(9), gen(9)
        drawn = [lesson["sample"](probs, mine) for _ in range(200)]
        assert drawn == [toy.sample(probs, theirs) for _ in range(200)]
        assert all(probs[t] > 0 for t in drawn)
        assert torch.equal(mine.get_state(), theirs.get_state())  # one uniform per token, as the package


def test_sample_falls_back_to_the_last_possible_token(lesson):
    """A total below 1 (rounding, exaggerated here): a uniform beyond it gives the last token with mass."""
    probs = torch.tensor([0.2, 0.3, 0.0, 0.0], dtype=torch.float64)
    g = gen(1)
    drawn = [lesson["sample"](probs, g) for _ in range(300)]
    assert set(drawn) == {0, 1} and drawn.count(1) > 150  # u in [0.2, 1) maps to token 1


def test_verify_is_one_pass_over_k_plus_one_positions(lesson):
    target, _ = toy.make_toy_pair(vocab_size=6, seed=2)
    rows = lesson["verify"](target, [4, 1], [3, 0, 5], 1.0)
    assert rows.shape == (4, 6)
    for i, prev in enumerate([1, 3, 0, 5]):  # after the context, then after each drafted token
        assert torch.equal(rows[i], target.next_token_probs([prev], 1.0))


# --------------------------------------------------------------------------- the same tokens as the package

CASES = list(itertools.product([0, 1, 2], [1, 3, 4, 6], [1.0, 0.7, 0.0]))


@pytest.mark.parametrize("seed,k,temperature", CASES)
def test_step_emits_the_packages_tokens(lesson, seed, k, temperature):
    target, draft = toy.make_toy_pair(vocab_size=12, draft_noise=1.5, seed=seed)
    for residual_pair in [(lesson["residual_distribution"], toy.residual_distribution), (wrong_q, wrong_q)]:
        mine, theirs = gen(seed + 100), gen(seed + 100)
        for context in ([seed], [3, 7], [11, 0, 5]):
            got = lesson["speculative_step"](target, draft, context, k, temperature, mine, residual_pair[0])
            want = toy.speculative_step(target, draft, context, k, temperature, theirs, residual_pair[1])
            assert got == want
        assert torch.equal(mine.get_state(), theirs.get_state())  # the same random numbers were drawn


@pytest.mark.parametrize("seed,k,temperature", CASES)
def test_generation_matches_the_package(lesson, seed, k, temperature):
    target, draft = toy.make_toy_pair(vocab_size=12, draft_noise=1.5, seed=seed)
    tokens, accepted = lesson["generate_speculative"](target, draft, [seed], 150, k, temperature, gen(seed))
    want, stats = toy.generate_speculative(target, draft, [seed], 150, k, temperature, gen(seed))
    assert tokens == want
    assert [a + 1 for a in accepted] == stats.tokens_per_step and len(accepted) == stats.steps
    # the comparison is not vacuous: rounds ended in a rejection, and with sampling also in a
    # bonus token (a greedy text may cycle where the draft never agrees k times running) ...
    assert min(accepted) < k
    if temperature > 0:
        assert max(accepted) == k
        # ... and another generator gives other tokens
        assert lesson["generate_speculative"](target, draft, [seed], 150, k, temperature, gen(seed + 1))[0] != tokens


# --------------------------------------------------------------------------- the target's distribution

SAMPLES = 6000


def _matches_exact(lesson, residual, position, temperature) -> tuple[bool, float, float]:
    """The check: the lesson's speculative token at ``position`` against the target's exact marginal."""
    target, draft = toy.make_toy_pair(vocab_size=8, draft_noise=1.5, sharpness=1.5, seed=5)
    exact = toy.target_marginal(target, [2], position, temperature)
    run = lambda g: lesson["generate_speculative"](target, draft, [2], position + 1, 3, temperature, g,  # noqa: E731
                                                   residual)[0]
    freqs = toy.token_histogram(run, position, target.vocab_size, SAMPLES, seed=11)
    tv, p_value = toy.tv_distance(freqs, exact), toy.chi_square_pvalue(freqs, exact, SAMPLES)
    return p_value > 1e-3 and tv < 0.03, tv, p_value


@pytest.mark.parametrize("position,temperature", [(3, 1.0), (2, 0.7)])
def test_speculative_sampling_keeps_the_target_distribution(lesson, position, temperature):
    """k=3: position 3 mixes accepted drafts, residual tokens and first-round bonus tokens. The same
    check, with the same runs and bounds, must reject both wrong residuals."""
    ok, tv, p_value = _matches_exact(lesson, lesson["residual_distribution"], position, temperature)
    assert ok, (tv, p_value)
    for wrong in (wrong_q, wrong_p):
        ok, tv, p_value = _matches_exact(lesson, wrong, position, temperature)
        assert not ok and p_value < 1e-6 and tv > 0.05, (wrong.__name__, tv, p_value)


# --------------------------------------------------------------------------- greedy


@pytest.mark.parametrize("seed", [1, 2, 4, 5])  # toy pairs whose greedy texts reject drafts at every k
@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_greedy_gives_the_targets_greedy_text(lesson, seed, k):
    target, draft = toy.make_toy_pair(vocab_size=16, draft_noise=1.5, seed=seed)
    prompt = [seed, (seed + 5) % 16]
    plain = toy.generate_plain(target, prompt, 60, temperature=0.0)
    spec, accepted = lesson["generate_speculative"](target, draft, prompt, 60, k, 0.0, gen(seed))
    assert spec == plain
    assert min(accepted) < k  # drafts were rejected: the correction path was taken
    context, rounds = list(prompt), []
    while len(context) - len(prompt) < 60:
        emitted, n = lesson["greedy_step"](target, draft, context, k)
        assert (emitted, n) == lesson["speculative_step"](target, draft, context, k, 0.0, gen(seed))
        context += emitted
        rounds.append(n)
    assert context[len(prompt):len(prompt) + 60] == plain
    assert rounds == accepted


def test_greedy_check_catches_a_wrong_rule(lesson):
    """The equality above can fail: keeping the draft's token after a mismatch changes the text."""
    target, draft = toy.make_toy_pair(vocab_size=16, draft_noise=1.5, seed=0)
    plain = toy.generate_plain(target, [0], 60, temperature=0.0)
    wrong, _ = lesson["generate_speculative"](target, draft, [0], 60, 4, 0.0, gen(0), wrong_q)
    assert wrong != plain
