"""``SpecCounters``: vLLM's four speculative-decoding counters and the figures derived from them.

vLLM counts, for the life of an engine, drafts (speculative steps), draft tokens proposed, draft
tokens accepted, and accepted tokens per draft position. Acceptance length, the draft acceptance
rate and per-position rates follow by arithmetic. The counters are cumulative, so a run is the
difference of two snapshots (``after - before``) and two runs add up. :mod:`speclab.measure.metrics`
reads them from vLLM; the lessons' replays (prompt lookup, suffix trees, the toy) count into the
same value so that their figures compare with vLLM's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class SpecCounters:
    """Cumulative speculative-decoding counters (or the difference of two snapshots)."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: tuple[int, ...] = field(default_factory=tuple)

    def __sub__(self, before: "SpecCounters") -> "SpecCounters":
        n = max(len(self.accepted_per_pos), len(before.accepted_per_pos))
        mine = list(self.accepted_per_pos) + [0] * (n - len(self.accepted_per_pos))
        theirs = list(before.accepted_per_pos) + [0] * (n - len(before.accepted_per_pos))
        diff = SpecCounters(
            self.num_drafts - before.num_drafts,
            self.num_draft_tokens - before.num_draft_tokens,
            self.num_accepted_tokens - before.num_accepted_tokens,
            tuple(a - b for a, b in zip(mine, theirs)),
        )
        if min(diff.num_drafts, diff.num_draft_tokens, diff.num_accepted_tokens, *diff.accepted_per_pos, 0) < 0:
            raise ValueError("counters went backwards: the snapshots come from different engines (or were swapped)")
        return diff

    def __add__(self, other: "SpecCounters") -> "SpecCounters":
        n = max(len(self.accepted_per_pos), len(other.accepted_per_pos))
        pad = lambda xs: list(xs) + [0] * (n - len(xs))  # noqa: E731
        return SpecCounters(self.num_drafts + other.num_drafts, self.num_draft_tokens + other.num_draft_tokens,
                            self.num_accepted_tokens + other.num_accepted_tokens,
                            tuple(a + b for a, b in zip(pad(self.accepted_per_pos), pad(other.accepted_per_pos))))

    @property
    def acceptance_length(self) -> float:
        """Mean tokens per speculative step: 1 (the target's own token) + accepted per draft."""
        return 1.0 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else 1.0

    @property
    def draft_acceptance_rate(self) -> float:
        """Share of proposed draft tokens that the target accepted."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def per_position_rates(self) -> list[float]:
        """Rate at position i: share of drafts whose first i+1 tokens were all accepted."""
        return [n / self.num_drafts if self.num_drafts else 0.0 for n in self.accepted_per_pos]

    def summary(self) -> dict:
        d = asdict(self)
        d["accepted_per_pos"] = list(self.accepted_per_pos)
        d.update(acceptance_length=self.acceptance_length, draft_acceptance_rate=self.draft_acceptance_rate,
                 per_position_rates=self.per_position_rates)
        return d
