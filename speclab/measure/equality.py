"""Greedy equality the way floating point allows: the first divergence and the margin there.

Speculative decoding is lossless in exact arithmetic: under greedy decoding the verified output is
the target's own argmax at every position. Real kernels are not exact. Verifying k+1 positions in
one forward pass runs other matrix shapes (and so other summation orders) than decoding one token,
and in bfloat16 two runs can then pick different tokens where the target's top two logits are
almost equal. From that token on, the two texts have different contexts and part for good.

So a check compares, per prompt, the baseline and speculative token ids up to the first position
where they differ, and reads the target's top-two margin there (log-probability of its first
choice minus that of its second, from the baseline run's ``logprobs=2``; a difference of
log-probabilities at one position is the difference of the logits). A divergence at a margin below
``NEAR_TIE`` is rounding; one at a clear margin means speculation changed the answer: a bug.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

# Top log-probabilities a greedy run asks vLLM for: two, the choice and the runner-up.
TOP_LOGPROBS = 2

# A margin below this many nats counts as a near-tie. SmolLM2's chosen-token logits lie between
# about 12 and 41 (measured on two answers), where bfloat16 stores a logit in steps of 0.125 or
# 0.25: a kernel that sums in another order can move a logit by a step or more, and 1 nat is four
# to eight steps. A clear choice leads by more: the median margin of SmolLM2's greedy steps on the
# workload prompts was 2.6 nats, and three in four steps led by more than 1. ``margin_drift``
# measures the rounding itself where outputs agree (lesson 02 prints it; on the CPU build, n-gram
# against the baseline, it was 0.000 both eager and compiled).
NEAR_TIE = 1.0


def top_two_margins(completion) -> list[float]:
    """Per generated position, top-1 minus top-2 log-probability, from a vLLM ``CompletionOutput``.

    Empty when the run did not ask for log-probabilities (``SamplingParams(logprobs=2)``).
    """
    margins = []
    for step in getattr(completion, "logprobs", None) or []:
        ranked = sorted((lp.logprob for lp in step.values()), reverse=True)
        margins.append(ranked[0] - ranked[1] if len(ranked) > 1 else float("inf"))
    return margins


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first position where two token sequences differ; ``None`` when they are equal.

    A sequence that stops early (end of sequence) differs at the position where the other goes on.
    """
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(frozen=True)
class Divergence:
    """Where one prompt's speculative output first parts from the baseline's."""

    prompt: int
    position: int
    margin: float | None  # the baseline's top-two margin there; None when it recorded no log-probabilities

    def near_tie(self, threshold: float = NEAR_TIE) -> bool:
        return self.margin is not None and self.margin < threshold


@dataclass(frozen=True)
class GreedyCheck:
    """The comparison of a baseline and a speculative greedy run of the same prompts."""

    num_prompts: int
    divergences: tuple[Divergence, ...]
    threshold: float = NEAR_TIE

    @property
    def identical(self) -> int:
        """How many prompts came out token for token the same."""
        return self.num_prompts - len(self.divergences)

    @property
    def clear(self) -> list[Divergence]:
        """Divergences that rounding cannot explain (or whose margin is unknown)."""
        return [d for d in self.divergences if not d.near_tie(self.threshold)]

    @property
    def ok(self) -> bool:
        return not self.clear

    def describe(self, listed: int = 3) -> str:
        """One line for a lesson's output: the first ``listed`` divergences, then a count and the margins' range."""
        line = f"{self.identical} of {self.num_prompts} outputs identical"
        if not self.divergences:
            return line
        shown = (self.clear + [d for d in self.divergences if d not in self.clear])[:listed]  # clear ones first
        where = ", ".join(f"prompt {d.prompt} at token {d.position} (margin "
                          f"{'unknown' if d.margin is None else f'{d.margin:.3f}'})" for d in shown)
        rest = len(self.divergences) - len(shown)
        if rest:
            known = [d.margin for d in self.divergences if d.margin is not None]
            span = f", margins {min(known):.3f}-{max(known):.3f}" if known else ""
            where += f" and {rest} more ({len(self.divergences)} in all{span})"
        return line + (f"; parted at near-ties only: {where}" if self.ok else f"; parted: {where}")

    def summary(self) -> dict:
        return {"num_prompts": self.num_prompts, "identical": self.identical, "ok": self.ok,
                "threshold": self.threshold, "divergences": [asdict(d) for d in self.divergences]}

    def require(self, what: str = "speculative decoding") -> None:
        """Raise when a divergence sits at a clear margin: that is a bug, not rounding."""
        if not self.ok:
            d = self.clear[0]
            raise AssertionError(
                f"{what} changed a greedy output where the target's choice was clear: prompt {d.prompt}, "
                f"token {d.position}, margin {d.margin} (near-tie threshold {self.threshold} nats)")


def divergences(checks: dict[str, GreedyCheck]) -> list[dict]:
    """Every divergence of several checks (e.g. one per prompt category), labelled, for a results file."""
    return [{"group": group, **asdict(d)} for group, check in checks.items() for d in check.divergences]


def compare(baseline_ids: list[list[int]], speculative_ids: list[list[int]],
            baseline_margins: list[list[float]] | None = None, threshold: float = NEAR_TIE) -> GreedyCheck:
    """Check the speculative outputs against the baseline's, prompt by prompt."""
    if len(baseline_ids) != len(speculative_ids):
        raise ValueError(f"{len(baseline_ids)} baseline outputs but {len(speculative_ids)} speculative ones")
    margins = baseline_margins or [[] for _ in baseline_ids]
    found = []
    for p, (base, spec) in enumerate(zip(baseline_ids, speculative_ids)):
        i = first_divergence(base, spec)
        if i is not None:
            margin = margins[p][i] if i < len(margins[p]) else None
            found.append(Divergence(prompt=p, position=i, margin=margin))
    return GreedyCheck(num_prompts=len(baseline_ids), divergences=tuple(found), threshold=threshold)


def margin_drift(baseline, speculative) -> list[float]:
    """|baseline margin - speculative margin| at every position where both texts still agree.

    The same tokens, computed by other kernels: how far rounding moves the numbers a near-tie is
    judged by. Empty unless both runs recorded log-probabilities.
    """
    drift = []
    for base_ids, spec_ids, base_m, spec_m in zip(baseline.token_ids, speculative.token_ids,
                                                    baseline.margins, speculative.margins):
        end = first_divergence(base_ids, spec_ids)
        end = len(base_ids) if end is None else end
        drift += [abs(a - b) for a, b in zip(base_m[:end], spec_m[:end]) if math.isfinite(a) and math.isfinite(b)]
    return drift


def check_runs(baseline, speculative, threshold: float = NEAR_TIE) -> GreedyCheck:
    """``compare`` for two ``bench.RunStats`` of the same prompts."""
    return compare(baseline.token_ids, speculative.token_ids, baseline.margins, threshold)
