"""The arithmetic of speculative decoding (Leviathan et al. 2023, Chen et al. 2023).

With per-token acceptance probability ``a`` (assumed independent across positions) and ``k``
draft tokens, one target step yields on average ``(1 - a^(k+1)) / (1 - a)`` tokens: the accepted
prefix plus the token the target adds itself. If a draft step costs ``c`` target steps, the
step costs ``k*c + 1`` target steps, and the speedup is the ratio of the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence


def _check(a: float, k: int) -> None:
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"acceptance rate a must lie in [0, 1], got {a}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")


def expected_tokens_per_step(a: float, k: int) -> float:
    """Mean tokens one verification step emits: 1 + a + a^2 + ... + a^k."""
    _check(a, k)
    if a == 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def speedup(a: float, k: int, c: float) -> float:
    """Expected wall-time speedup against plain decoding, with draft/target cost ratio ``c``."""
    if c < 0:
        raise ValueError(f"cost ratio c must be >= 0, got {c}")
    return expected_tokens_per_step(a, k) / (k * c + 1.0)


def best_k(a: float, c: float, k_max: int = 16) -> int:
    """The k in 1..k_max with the highest predicted speedup (ties go to the smaller k)."""
    return max(range(1, k_max + 1), key=lambda k: (round(speedup(a, k, c), 12), -k))


def acceptance_from_length(length: float, k: int) -> float:
    """Invert expected_tokens_per_step: the ``a`` that gives a measured mean acceptance length."""
    if not 1.0 <= length <= k + 1:
        raise ValueError(f"acceptance length must lie in [1, {k + 1}] for k={k}, got {length}")
    lo, hi = 0.0, 1.0
    for _ in range(60):  # bisection: the function is increasing in a
        mid = (lo + hi) / 2
        if expected_tokens_per_step(mid, k) < length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def acceptance_from_positions(rates: Sequence[float]) -> float:
    """Estimate ``a`` from per-position acceptance rates.

    vLLM's rate at position i is P(first i+1 draft tokens all accepted), which the i.i.d. model
    predicts as a^(i+1). A least-squares fit of log(rate) = (i+1) log(a) through the origin
    weighs every position; positions with rate 0 carry no information about a and are skipped.
    """
    points = [(i + 1, math.log(r)) for i, r in enumerate(rates) if r > 0]
    if not points:
        return 0.0
    slope = sum(n * y for n, y in points) / sum(n * n for n, _ in points)
    return min(1.0, math.exp(slope))


def predicted_positions(a: float, k: int) -> list[float]:
    """Per-position rates the i.i.d. model predicts: [a, a^2, ..., a^k]."""
    _check(a, k)
    return [a ** (i + 1) for i in range(k)]


def rule_of_thumb(draft_acceptance_rate: float) -> str:
    """A common tuning rule: above 70% raise k; below 50% lower it (or change drafter)."""
    if draft_acceptance_rate > 0.70:
        return "raise k"
    if draft_acceptance_rate < 0.50:
        return "lower k or use a better drafter"
    return "keep k"


# ---------------------------------------------------------------- a measured cost model

# The plain formula prices a speculative step at 1 + k*c target steps. On a GPU the step costs
# more than that even at k -> 0: the target verifies k+1 positions instead of one, the engine
# prepares and rejects drafts, and (in vLLM's draft_model path) it gives up asynchronous
# scheduling. A straight line in k, fitted to measured step times, captures both costs:
#     step_time(k) = t_fixed + k * t_draft


@dataclass(frozen=True)
class StepCost:
    """Measured step times (any one unit): plain decoding, and the line a speculative step follows."""

    t_target: float  # one plain decoding step
    t_fixed: float  # a speculative step's cost at k = 0 (the line's intercept)
    t_draft: float  # each draft token adds this (the line's slope)

    def step_time(self, k: int) -> float:
        return self.t_fixed + k * self.t_draft

    def speedup(self, a: float, k: int) -> float:
        """Tokens per step over step time, against one token per plain step."""
        return expected_tokens_per_step(a, k) * self.t_target / self.step_time(k)

    @property
    def cost_ratio(self) -> float:
        """The ``c`` the plain formula would take: a draft token's cost over a target step."""
        return self.t_draft / self.t_target

    @property
    def overhead(self) -> float:
        """What a speculative step costs beyond a plain one before any drafting (t_fixed / t_target)."""
        return self.t_fixed / self.t_target


def fit_step_cost(ks: Sequence[int], step_times: Sequence[float], t_target: float) -> StepCost:
    """Least-squares line through measured speculative step times against k (needs two k values)."""
    if len(ks) != len(step_times) or len(set(ks)) < 2:
        raise ValueError("fit_step_cost needs step times for at least two different k")
    n = len(ks)
    mean_k, mean_t = sum(ks) / n, sum(step_times) / n
    slope = sum((k - mean_k) * (t - mean_t) for k, t in zip(ks, step_times)) / sum((k - mean_k) ** 2 for k in ks)
    return StepCost(t_target=t_target, t_fixed=mean_t - slope * mean_k, t_draft=slope)


def cost_model_speedup(a: float, k: int, t_target: float, t_fixed: float, t_draft: float) -> float:
    """Speedup predicted by the measured cost model: E[tokens](a, k) * t_target / (t_fixed + k * t_draft)."""
    return StepCost(t_target, t_fixed, t_draft).speedup(a, k)


def break_even_acceptance(k: int, cost: StepCost) -> float:
    """The per-token acceptance a at which speculation with this k only matches plain decoding."""
    if cost.speedup(1.0, k) < 1.0:
        return float("nan")  # even perfect acceptance does not pay
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if cost.speedup(mid, k) < 1.0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
