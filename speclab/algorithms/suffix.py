"""Suffix decoding in plain Python: draft from a tree of everything already written.

Suffix decoding (Oliaro et al., 2024; vLLM's ``suffix`` method runs Arctic Inference's implementation)
keeps two suffix trees: one over the request itself (its prompt and its answer so far, what n-gram
lookup searches), one over every answer the server has generated (earlier ones and the one being written).
A tree holds every window of up to ``max_depth`` tokens as a path from the root, and each node counts how
often its path occurred. To draft, the proposer matches the end of the context against a tree, then walks
down the most frequent child while the path's estimated probability stays at or above ``min_token_prob``,
for at most ``max_spec_factor`` x (match length) tokens: a long match earns a long draft, a short one a
short draft or none. Of the drafts from every match length
and both trees it keeps the one with the most expected accepted tokens (the sum of its probabilities).

Unlike n-gram prompt lookup (``speclab.algorithms.ngram_lookup``), it remembers across requests: an agent's tool calls,
a template filled again and again, or a request sent twice are drafted from the earlier answers.
``replay_requests`` runs it over finished greedy generations, in order, and counts what a speculative run
would have accepted, as ``ngram_lookup.replay`` does for n-gram. Lesson 14 writes the tree, its drafts and the
replay out in its own cells (tests/test_lesson14_definitions.py holds them to these).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Sequence

from .counters import SpecCounters
from .ngram_lookup import replay_with

# vLLM's defaults (SpeculativeConfig.suffix_decoding_*); num_speculative_tokens defaults to the tree depth
MAX_DEPTH = 24
MAX_SPEC_FACTOR = 1.0
MIN_TOKEN_PROB = 0.1


@dataclass
class Node:
    """A path from the root: how often it occurred, and its children by token, most frequent first."""

    count: int = 0
    children: dict[int, "Node"] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # child tokens by count, the likeliest first

    def count_child(self, token: int) -> "Node":
        """One more occurrence of ``token`` after this path. Arctic Inference's order among equal counts is
        kept (so that drafts match it token for token): a child that moves up goes first among its new equals
        when it passes a count, last when it catches up with a count ahead of it."""
        child = self.children.get(token)
        if child is None:  # a new child comes last
            child = self.children[token] = Node(count=1)
            self.order.append(token)
            return child
        i = self.order.index(token)
        if i > 0 and self.children[self.order[i - 1]].count <= child.count + 1:
            ahead = self.children[self.order[i - 1]].count
            head = next(j for j, t in enumerate(self.order) if self.children[t].count == ahead)
            self.order.insert(head, self.order.pop(i))
        child.count += 1
        return child

    def likeliest(self) -> tuple[int, "Node"] | None:
        return (self.order[0], self.children[self.order[0]]) if self.order else None


@dataclass(frozen=True)
class Draft:
    tokens: list[int]
    probs: list[float]  # the estimated probability that the draft is accepted up to and including each token
    match_length: int

    @property
    def score(self) -> float:
        """Expected number of accepted tokens, if the estimates are right."""
        return sum(self.probs)


NO_DRAFT = Draft([], [], 0)


class SuffixTree:
    """Every window of up to ``max_depth`` consecutive tokens of the sequences appended, as counted paths."""

    def __init__(self, max_depth: int = MAX_DEPTH):
        if max_depth < 1:
            raise ValueError(f"max_depth must be at least 1, not {max_depth}")
        self.max_depth = max_depth
        self.root = Node()
        self._open: dict[Hashable, list[Node]] = {}  # per sequence: the nodes of its last windows, shortest first

    def append(self, sequence: Hashable, tokens: Sequence[int]) -> None:
        """Add tokens at the end of ``sequence``: each new token ends one more window of every length."""
        ends = self._open.get(sequence, [])
        for token in tokens:
            grown = []
            for node in [self.root, *ends]:  # the root starts the window of length 1; each open window grows by one
                grown.append(node.count_child(token))
            ends = grown[: self.max_depth - 1]  # a window of max_depth tokens grows no further
        self._open[sequence] = ends

    def find(self, pattern: Sequence[int]) -> Node | None:
        """The node whose path is ``pattern``, or None where the tree never saw it."""
        node = self.root
        for token in pattern:
            node = node.children.get(token)
            if node is None:
                return None
        return node

    def speculate(self, context: Sequence[int], max_tokens: int, max_spec_factor: float = MAX_SPEC_FACTOR,
                  min_token_prob: float = MIN_TOKEN_PROB) -> Draft:
        """The best draft over every match of the context's end (the longer match kept on a tie)."""
        best = NO_DRAFT
        for length in range(1, min(len(context), self.max_depth)):  # shortest first; never the whole context
            node = self.find(context[len(context) - length:])
            if node is None:  # no longer match either
                break
            draft = _walk(node, min(max_tokens, int(length * max_spec_factor + 1e-6)), min_token_prob, length)
            if draft.score >= best.score:
                best = draft
        return best


def _walk(node: Node, max_tokens: int, min_token_prob: float, match_length: int) -> Draft:
    """Follow the most frequent child while the path stays likely enough."""
    tokens, probs, prob = [], [], 1.0
    while len(tokens) < max_tokens and node.order:
        token, child = node.likeliest()
        prob *= child.count / node.count
        if prob < min_token_prob:
            break
        tokens.append(token)
        probs.append(prob)
        node = child
    return Draft(tokens, probs, match_length)


class SuffixCache:
    """The proposer's state across requests: one tree over all responses, one per request over its own tokens."""

    def __init__(self, max_depth: int = MAX_DEPTH, max_spec_factor: float = MAX_SPEC_FACTOR,
                 min_token_prob: float = MIN_TOKEN_PROB):
        self.responses = SuffixTree(max_depth)
        self.max_spec_factor = max_spec_factor
        self.min_token_prob = min_token_prob

    def start(self, request: Hashable, prompt: Sequence[int], k: int) -> "Request":
        """Open a request: a tree of its own over its prompt (its answer joins it, and the shared tree)."""
        return Request(self, request, prompt, k)


class Request:
    """One request being served: ``draft(context)`` files the response tokens that are new, then drafts."""

    def __init__(self, cache: SuffixCache, name: Hashable, prompt: Sequence[int], k: int):
        self.cache, self.name, self.k = cache, name, k
        self.own = SuffixTree(cache.responses.max_depth)
        self.own.append(name, prompt)
        self.filed = len(prompt)

    def file(self, context: Sequence[int]) -> None:
        """File the tokens of ``context`` (prompt + response so far) not yet filed, in both trees."""
        self.own.append(self.name, context[self.filed:])
        self.cache.responses.append(self.name, context[self.filed:])
        self.filed = len(context)

    def draft(self, context: Sequence[int]) -> list[int]:
        self.file(context)
        c = self.cache
        pattern = context[-c.responses.max_depth:]
        found = [tree.speculate(pattern, self.k, c.max_spec_factor, c.min_token_prob)
                 for tree in (self.own, c.responses)]
        return max(found, key=lambda d: d.score).tokens  # the request's own tree on a tie


def replay_requests(requests: Sequence[tuple[Sequence[int], Sequence[int]]], k: int = MAX_DEPTH,
                    cache: SuffixCache | None = None) -> list[SpecCounters]:
    """Counters a greedy suffix-decoding run would report for each (prompt, greedy output), served in order:
    each request drafts from its own tokens and from every response before it."""
    cache = cache or SuffixCache()
    counters = []
    for i, (prompt, output) in enumerate(requests):
        request = cache.start(i, prompt, k)
        counters.append(replay_with(request.draft, prompt, output, k))
        request.file(list(prompt) + list(output))  # the whole answer is there for the next request
    return counters
