"""Speculative decoding from scratch, on a toy small enough to read in one sitting.

No vLLM here: two "language models" are lookup tables over a tiny vocabulary, and the whole
algorithm is a few loops in plain torch. Lesson 01 writes the same algorithm out in its own cells
(tests/test_lesson01_definitions.py holds the two to the same tokens) and uses this module's
models and measuring tools to show the three facts the rest of the series relies on:

* greedy speculative decoding emits exactly the target's greedy tokens;
* with sampling, the accept/reject rule leaves the target's distribution unchanged;
* the mean number of tokens per target step follows ``speclab.algorithms.theory.expected_tokens_per_step``.

The models are *bigram* models: the next-token distribution depends only on the last token, so
a model is a ``[vocab, vocab]`` table of logits (row = previous token). The draft is the target
plus noise, so it agrees with the target often but not always.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from .counters import SpecCounters

# --------------------------------------------------------------------------- models


@dataclass(frozen=True)
class ToyModel:
    """A bigram language model: ``logits[prev, next]``."""

    logits: torch.Tensor
    name: str = "toy"
    _tables: dict = field(default_factory=dict, repr=False, compare=False)  # temperature -> table

    @property
    def vocab_size(self) -> int:
        return self.logits.shape[-1]

    def table(self, temperature: float) -> torch.Tensor:
        """All next-token distributions at once: row ``t`` is P(next | last token = t).

        Temperature 0 means greedy: each row puts all its mass on the row's argmax.
        """
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if temperature not in self._tables:
            if temperature == 0:
                table = torch.nn.functional.one_hot(self.logits.argmax(-1), self.vocab_size).to(self.logits.dtype)
            else:
                table = torch.softmax(self.logits / temperature, dim=-1)
            self._tables[temperature] = table
        return self._tables[temperature]

    def next_token_probs(self, context: Sequence[int], temperature: float) -> torch.Tensor:
        """P(next token | context); only the last token matters for a bigram model."""
        return self.table(temperature)[context[-1]]

    def forward_pass(self, tokens: Sequence[int], temperature: float) -> torch.Tensor:
        """The next-token distribution after *each* of ``tokens``, in one call: ``[len(tokens), vocab]``.

        This is what makes verification cheap in a real transformer: scoring k drafted tokens
        costs one forward pass over them (with the KV cache holding everything earlier), not k
        passes. A bigram model needs nothing earlier at all.
        """
        return self.table(temperature)[torch.as_tensor(list(tokens))]


def make_toy_pair(vocab_size: int = 12, draft_noise: float = 1.0, sharpness: float = 2.5,
                  seed: int = 0) -> tuple[ToyModel, ToyModel]:
    """A target and a draft that imitates it: the draft's logits are the target's plus noise.

    ``sharpness`` scales the target's logits (larger: more confident target). ``draft_noise``
    is the standard deviation of the noise (0: the draft *is* the target, so every draft token
    is accepted; large: the draft guesses and most tokens are rejected).
    """
    gen = torch.Generator().manual_seed(seed)
    target_logits = sharpness * torch.randn(vocab_size, vocab_size, generator=gen, dtype=torch.float64)
    draft_logits = target_logits + draft_noise * torch.randn(vocab_size, vocab_size, generator=gen, dtype=torch.float64)
    return ToyModel(target_logits, "target"), ToyModel(draft_logits, "draft")


def sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """Draw one token id from a probability vector by walking its cumulative sum.

    (``torch.multinomial`` does the same; this is a few times faster on a 12-token vocabulary,
    which matters when a lesson draws a few hundred thousand tokens.)
    """
    u = float(torch.rand((), generator=generator, dtype=torch.float64))
    cumulative = 0.0
    for token, prob in enumerate(probs.tolist()):
        cumulative += prob
        if u < cumulative:
            return token
    return max(t for t, prob in enumerate(probs.tolist()) if prob > 0)  # u beyond a sum rounded below 1


# --------------------------------------------------------------------------- plain decoding


def generate_plain(target: ToyModel, prompt: Sequence[int], n: int, temperature: float = 0.0,
                   generator: torch.Generator | None = None) -> list[int]:
    """Ordinary autoregressive decoding: one target call per token. Returns the n new tokens."""
    context = list(prompt)
    for _ in range(n):
        context.append(sample(target.next_token_probs(context, temperature), generator))
    return context[len(prompt):]


# --------------------------------------------------------------------------- speculative decoding


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """What to sample after a rejection: norm(max(0, p - q)).

    It holds the probability mass the target wants but the draft under-proposed. (Rejecting x
    needs q(x) > p(x); then p exceeds q somewhere else, so the mass is positive. The fallback
    to p only guards against rounding.)
    """
    mass = torch.clamp(p - q, min=0.0)
    total = mass.sum()
    return mass / total if total > 1e-12 else p


def acceptance_probability(p: torch.Tensor, q: torch.Tensor) -> float:
    """Chance that one draft token sampled from q is accepted: sum(min(p, q)) = 1 - TV(p, q)."""
    return float(torch.minimum(p, q).sum())


@dataclass
class SpecStats:
    """What happened during a speculative generation, counted the way vLLM counts it."""

    k: int
    steps: int = 0  # target forward passes (vLLM: num_drafts)
    accepted_per_position: list[int] = field(default_factory=list)  # steps whose draft token i was accepted
    tokens_per_step: list[int] = field(default_factory=list)  # tokens emitted by each step (1..k+1)

    def __post_init__(self):
        self.accepted_per_position = self.accepted_per_position or [0] * self.k

    def record(self, num_accepted: int) -> None:
        self.steps += 1
        for i in range(num_accepted):
            self.accepted_per_position[i] += 1
        self.tokens_per_step.append(num_accepted + 1)

    @property
    def counters(self) -> SpecCounters:
        """The same counts in vLLM's form; ``speclab.measure.metrics`` defines the figures for both."""
        return SpecCounters(num_drafts=self.steps, num_draft_tokens=self.steps * self.k,
                            num_accepted_tokens=sum(self.accepted_per_position),
                            accepted_per_pos=tuple(self.accepted_per_position))

    @property
    def acceptance_length(self) -> float:
        """Mean tokens per target step (no steps yet: 1, as plain decoding)."""
        return self.counters.acceptance_length

    @property
    def draft_acceptance_rate(self) -> float:
        """Accepted draft tokens / proposed draft tokens."""
        return self.counters.draft_acceptance_rate

    @property
    def per_position_rates(self) -> list[float]:
        """Rate at position i: share of steps whose first i+1 draft tokens were all accepted."""
        return self.counters.per_position_rates

    def summary(self) -> dict:
        return {"k": self.k, "steps": self.steps, "accepted_per_position": list(self.accepted_per_position),
                "acceptance_length": self.acceptance_length, "draft_acceptance_rate": self.draft_acceptance_rate,
                "per_position_rates": self.per_position_rates}


Residual = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def speculative_step(target: ToyModel, draft: ToyModel, context: Sequence[int], k: int, temperature: float,
                     generator: torch.Generator | None = None,
                     residual: Residual = residual_distribution) -> tuple[list[int], int]:
    """One draft -> verify -> accept round. Returns (emitted tokens, number of draft tokens accepted).

    At temperature 0 both distributions are one-hot, so the same rule reads: accept iff the
    draft token is the target's argmax, and on a rejection emit the target's argmax.
    """
    # 1. Draft: the cheap model proposes k tokens, one after the other, remembering each q.
    drafted, q_rows, ctx = [], [], list(context)
    for _ in range(k):
        q = draft.next_token_probs(ctx, temperature)
        token = sample(q, generator)
        drafted.append(token)
        q_rows.append(q)
        ctx.append(token)

    # 2. Verify: one target pass over [last context token, d1, ..., dk] gives p after each of
    #    the k+1 prefixes context, context+d1, ..., context+d1..dk.
    p_rows = target.forward_pass(ctx[len(context) - 1:], temperature)

    # 3. Accept left to right: keep draft token x with probability min(1, p(x) / q(x)).
    uniforms = torch.rand(k, generator=generator, dtype=torch.float64).tolist()
    for i, (token, q) in enumerate(zip(drafted, q_rows)):
        p = p_rows[i]
        if uniforms[i] < p[token].item() / q[token].item():
            continue
        # First rejection: replace the token by a sample from the residual and stop.
        return drafted[:i] + [sample(residual(p, q), generator)], i

    # 4. All k accepted: the target's last distribution gives a bonus token for free.
    return drafted + [sample(p_rows[k], generator)], k


def generate_speculative(target: ToyModel, draft: ToyModel, prompt: Sequence[int], n: int, k: int = 4,
                         temperature: float = 0.0, generator: torch.Generator | None = None,
                         residual: Residual = residual_distribution) -> tuple[list[int], SpecStats]:
    """Speculative decoding of n new tokens. Returns (tokens, stats).

    ``residual`` is the distribution sampled after a rejection; it is a parameter only so that a
    test (and the lesson) can swap in a wrong one and watch the output distribution drift.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    context, stats = list(prompt), SpecStats(k)
    while len(context) - len(prompt) < n:
        emitted, accepted = speculative_step(target, draft, context, k, temperature, generator, residual)
        context += emitted
        stats.record(accepted)
    return context[len(prompt):len(prompt) + n], stats  # the last step may overshoot n


# --------------------------------------------------------------------------- checking the distribution


def target_marginal(target: ToyModel, prompt: Sequence[int], position: int, temperature: float) -> torch.Tensor:
    """Exact P(new token number ``position`` = v) under plain target sampling (0 = first new token).

    For a bigram model this is a Markov chain: start from the prompt's last token and multiply
    by the transition table once per generated token.
    """
    table = target.table(temperature)
    dist = table[prompt[-1]]
    for _ in range(position):
        dist = dist @ table
    return dist


def token_histogram(generate: Callable[[torch.Generator], list[int]], position: int, vocab_size: int,
                    num_samples: int, seed: int = 0) -> torch.Tensor:
    """Empirical distribution of the token at ``position`` over ``num_samples`` independent runs.

    ``generate(generator)`` returns the new tokens of one run, e.g.
    ``lambda g: generate_speculative(target, draft, prompt, position + 1, k, 1.0, g)[0]``.
    """
    gen = torch.Generator().manual_seed(seed)
    counts = [0] * vocab_size
    for _ in range(num_samples):
        counts[generate(gen)[position]] += 1
    return torch.tensor(counts, dtype=torch.float64) / num_samples


def tv_distance(p: torch.Tensor, q: torch.Tensor) -> float:
    """Total-variation distance: the largest gap in probability the two give to any event."""
    return 0.5 * float((p - q).abs().sum())


def chi_square_pvalue(freqs: torch.Tensor, expected: torch.Tensor, num_samples: int) -> float:
    """Pearson's goodness-of-fit test: how likely a gap this large is if the samples follow ``expected``.

    A token seen although ``expected`` gives it probability 0 is impossible: p-value 0. The
    other zero-probability tokens are left out; degrees of freedom = remaining categories - 1.
    """
    keep = expected > 0
    if float(freqs[~keep].sum()) > 0:
        return 0.0
    if int(keep.sum()) < 2:  # one possible token (greedy): nothing left to test
        return 1.0
    observed, wanted = freqs[keep] * num_samples, expected[keep] * num_samples
    stat = ((observed - wanted) ** 2 / wanted).sum()
    dof = torch.tensor(float(keep.sum() - 1), dtype=torch.float64)
    return float(torch.special.gammaincc(dof / 2, stat / 2))


# --------------------------------------------------------------------------- the i.i.d. model


def simulate_acceptance(a: float, k: int, num_steps: int, seed: int = 0) -> SpecStats:
    """Speculative steps in which every draft token is accepted with probability ``a``, independently.

    This is the assumption behind ``theory.expected_tokens_per_step``: a step emits its accepted
    prefix plus one token from the target, so its mean should be 1 + a + ... + a^k.
    """
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"acceptance rate a must lie in [0, 1], got {a}")
    gen = torch.Generator().manual_seed(seed)
    accepted = torch.rand(num_steps, k, generator=gen, dtype=torch.float64) < a  # [steps, k]
    prefix = accepted.long().cumprod(dim=1)  # 1 while every earlier token was accepted too
    stats = SpecStats(k, steps=num_steps, accepted_per_position=prefix.sum(0).tolist())
    stats.tokens_per_step = (prefix.sum(1) + 1).tolist()
    return stats
