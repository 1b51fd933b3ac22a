"""The toy speculative decoder: greedy equality, distribution preservation, the i.i.d. formula."""

import math

import pytest
import torch

from speclab.algorithms import theory, toy


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- building blocks


def test_residual_and_acceptance_by_hand():
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.2, 0.6, 0.2], dtype=torch.float64)
    # max(0, p - q) = [0.3, 0, 0] -> normalised [1, 0, 0]; sum(min(p, q)) = 0.2 + 0.3 + 0.2
    assert toy.residual_distribution(p, q).tolist() == pytest.approx([1.0, 0.0, 0.0])
    assert toy.acceptance_probability(p, q) == pytest.approx(0.7)
    assert toy.tv_distance(p, q) == pytest.approx(0.3)


def test_one_step_emits_exactly_p_on_paper():
    """P(first token = x) = q(x) min(1, p(x)/q(x)) + P(reject) residual(x) = p(x), for any p, q."""
    g = gen(3)
    for _ in range(20):
        p = torch.softmax(2 * torch.randn(9, generator=g, dtype=torch.float64), 0)
        q = torch.softmax(2 * torch.randn(9, generator=g, dtype=torch.float64), 0)
        accept = q * torch.clamp(p / q, max=1.0)
        emitted = accept + (1 - accept.sum()) * toy.residual_distribution(p, q)
        assert torch.allclose(emitted, p, atol=1e-12)
        wrong = accept + (1 - accept.sum()) * q  # resampling from the draft instead
        assert toy.tv_distance(wrong, p) > 0.01


def test_tables_and_temperature():
    target, _ = toy.make_toy_pair(vocab_size=5, seed=1)
    greedy = target.table(0.0)
    assert greedy.sum(-1).tolist() == [1.0] * 5
    assert greedy.argmax(-1).tolist() == target.logits.argmax(-1).tolist()
    assert torch.allclose(target.table(1.0).sum(-1), torch.ones(5, dtype=torch.float64))
    assert toy.acceptance_probability(*(m.table(1.0)[0]
                                        for m in toy.make_toy_pair(5, draft_noise=0.0))) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        target.table(-0.5)


def test_stats_count_like_vllm():
    stats = toy.SpecStats(k=3)
    for accepted in (3, 0, 1, 2):
        stats.record(accepted)
    assert stats.steps == 4
    assert stats.accepted_per_position == [3, 2, 1]  # position i counts steps with > i accepted
    assert stats.tokens_per_step == [4, 1, 2, 3]
    assert stats.acceptance_length == 2.5
    assert stats.draft_acceptance_rate == 6 / 12
    assert stats.per_position_rates == [0.75, 0.5, 0.25]
    assert stats.counters.num_accepted_tokens == 6 and stats.counters.num_draft_tokens == 12
    empty = toy.SpecStats(k=3)  # no step yet: the figures vLLM's counters give for no drafts
    assert (empty.acceptance_length, empty.draft_acceptance_rate) == (1.0, 0.0)


def test_chi_square_pvalue_by_hand():
    half = torch.tensor([0.5, 0.5], dtype=torch.float64)
    assert toy.chi_square_pvalue(half, half, 100) == pytest.approx(1.0)
    # 60 vs 40 out of 100 against 50/50: statistic 4 on 1 degree of freedom -> p = 0.0455
    assert (toy.chi_square_pvalue(torch.tensor([0.6, 0.4], dtype=torch.float64), half, 100)
            == pytest.approx(0.0455, abs=1e-4))
    certain = torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert toy.chi_square_pvalue(certain, certain, 100) == 1.0  # greedy: one possible token
    assert toy.chi_square_pvalue(torch.tensor([0.99, 0.01], dtype=torch.float64), certain, 100) == 0.0


# --------------------------------------------------------------------------- greedy


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_greedy_speculative_equals_plain_greedy(seed, k):
    target, draft = toy.make_toy_pair(vocab_size=16, draft_noise=1.5, seed=seed)
    prompt = [seed % 16, (seed + 5) % 16]
    plain = toy.generate_plain(target, prompt, 60, temperature=0.0)
    spec, stats = toy.generate_speculative(target, draft, prompt, 60, k=k, temperature=0.0, generator=gen(seed))
    assert spec == plain
    assert stats.steps <= 60


def test_greedy_with_a_wrong_acceptance_rule_differs():
    """The equality above is a real check: the speculative generator with a wrong rule (on a rejection,
    keep the draft's token: the residual is q instead of the target's choice) changes the greedy text."""
    target, draft = toy.make_toy_pair(vocab_size=16, draft_noise=1.5, seed=0)
    plain = toy.generate_plain(target, [0], 60, temperature=0.0)
    right, _ = toy.generate_speculative(target, draft, [0], 60, k=4, temperature=0.0, generator=gen(0))
    wrong, stats = toy.generate_speculative(target, draft, [0], 60, k=4, temperature=0.0, generator=gen(0),
                                            residual=lambda p, q: q)
    assert right == plain and wrong != plain
    assert stats.draft_acceptance_rate < 1.0  # drafts were rejected, and the wrong rule kept them anyway


def test_perfect_draft_accepts_everything():
    target, draft = toy.make_toy_pair(vocab_size=10, draft_noise=0.0, seed=4)
    for temperature in (0.0, 1.0):
        tokens, stats = toy.generate_speculative(target, draft, [1], 50, k=4, temperature=temperature, generator=gen(0))
        assert len(tokens) == 50
        assert stats.steps == math.ceil(50 / 5)
        assert stats.tokens_per_step == [5] * stats.steps
        assert stats.per_position_rates == [1.0] * 4


def test_k_must_be_positive():
    target, draft = toy.make_toy_pair()
    with pytest.raises(ValueError):
        toy.generate_speculative(target, draft, [0], 5, k=0)


# --------------------------------------------------------------------------- sampling keeps p

SAMPLES = 6000


def _histogram(target, draft, position, residual=toy.residual_distribution, seed=11):
    run = lambda g: toy.generate_speculative(target, draft, [2], position + 1, k=3, temperature=1.0,  # noqa: E731
                                             generator=g, residual=residual)[0]
    return toy.token_histogram(run, position, target.vocab_size, SAMPLES, seed=seed)


@pytest.mark.parametrize("position", [0, 2])
def test_speculative_sampling_keeps_target_distribution(position):
    target, draft = toy.make_toy_pair(vocab_size=8, draft_noise=1.5, sharpness=1.5, seed=5)
    exact = toy.target_marginal(target, [2], position, temperature=1.0)
    freqs = _histogram(target, draft, position)
    assert toy.chi_square_pvalue(freqs, exact, SAMPLES) > 1e-3
    assert toy.tv_distance(freqs, exact) < 0.03


@pytest.mark.parametrize("name", ["draft q", "target p"])
def test_a_wrong_residual_is_detected(name):
    """Resampling from q (or from p) after a rejection shifts the distribution; the test sees it."""
    target, draft = toy.make_toy_pair(vocab_size=8, draft_noise=1.5, sharpness=1.5, seed=5)
    wrong = (lambda p, q: q) if name == "draft q" else (lambda p, q: p)
    exact = toy.target_marginal(target, [2], 0, temperature=1.0)
    freqs = _histogram(target, draft, 0, residual=wrong)
    assert toy.chi_square_pvalue(freqs, exact, SAMPLES) < 1e-6
    assert toy.tv_distance(freqs, exact) > 0.08


def test_target_marginal_matches_plain_sampling():
    target, _ = toy.make_toy_pair(vocab_size=8, sharpness=1.5, seed=5)
    exact = toy.target_marginal(target, [2], 2, temperature=1.0)
    assert float(exact.sum()) == pytest.approx(1.0)
    freqs = toy.token_histogram(lambda g: toy.generate_plain(target, [2], 3, 1.0, g), 2, 8, SAMPLES, seed=1)
    assert toy.chi_square_pvalue(freqs, exact, SAMPLES) > 1e-3


# --------------------------------------------------------------------------- the i.i.d. formula


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("a", [0.3, 0.6, 0.8, 0.95])
def test_simulation_matches_expected_tokens_per_step(a, k):
    stats = toy.simulate_acceptance(a, k, num_steps=40_000, seed=7)
    lengths = torch.tensor(stats.tokens_per_step, dtype=torch.float64)
    stderr = float(lengths.std()) / math.sqrt(len(lengths))
    assert abs(stats.acceptance_length - theory.expected_tokens_per_step(a, k)) < 4 * stderr + 1e-9
    for measured, predicted in zip(stats.per_position_rates, theory.predicted_positions(a, k)):
        assert measured == pytest.approx(predicted, abs=0.015)


def test_simulation_edge_cases():
    never = toy.simulate_acceptance(0.0, 4, num_steps=500)
    assert never.tokens_per_step == [1] * 500 and never.per_position_rates == [0.0] * 4
    assert never.acceptance_length == theory.expected_tokens_per_step(0.0, 4) == 1.0
    always = toy.simulate_acceptance(1.0, 4, num_steps=500)
    assert always.tokens_per_step == [5] * 500 and always.per_position_rates == [1.0] * 4
    assert always.acceptance_length == theory.expected_tokens_per_step(1.0, 4) == 5.0
    with pytest.raises(ValueError):
        toy.simulate_acceptance(1.2, 4, num_steps=10)


def test_toy_tokens_per_step_follow_its_own_acceptance():
    """A long toy run: the formula, fed the per-token rate estimated from positions, predicts the length."""
    target, draft = toy.make_toy_pair(vocab_size=12, draft_noise=1.0, seed=0)
    _, stats = toy.generate_speculative(target, draft, [0], 3000, k=4, temperature=1.0, generator=gen(0))
    a = theory.acceptance_from_positions(stats.per_position_rates)
    assert stats.acceptance_length == pytest.approx(theory.expected_tokens_per_step(a, 4), rel=0.05)
    # vLLM's "draft acceptance rate" is not a: drafts after a rejection count as drafted, never accepted
    assert stats.draft_acceptance_rate < a
