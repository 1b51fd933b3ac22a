"""Token trees: draft several continuations at once and verify them all in one target pass.

A chain drafts one guess per position, so one early miss wastes every later guess. A tree keeps
the draft's runner-up guesses too: node i holds a token and hangs from a parent (``-1``: the last
context token). The target scores every node in one pass, each node seeing only its own ancestors
(``TokenTree.attention_mask``), and verification walks down from the root, keeping at most one
child per level. A chain is the tree of width one, so one verifier serves both.

How a node's token was drafted decides its acceptance rule, and both rules keep the target's
distribution exactly. A token *sampled* from the draft's q is lesson 01's case: accept with
probability min(1, p(x)/q(x)). A token picked *by rank* (the draft's top choices: greedy drafting,
Medusa's and EAGLE's trees) has a one-hot q, so it is accepted with probability p(x). Siblings are
tried in turn against what the earlier rejections left of p. vLLM drafts greedily by default
(``draft_sample_method="greedy"``): a one-node-wide tree of ranked tokens.

``typical_verify`` is Medusa-2's typical acceptance, for contrast: it accepts any candidate the
target finds plausible enough, which raises acceptance and gives up the exact distribution.

Everything runs on ``speclab.algorithms.toy``'s bigram models; lesson 13 writes the verifier out in its own
cells (tests/test_lesson13_definitions.py holds the two to the same tokens).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from .toy import SpecStats, ToyModel, residual_distribution, sample


@dataclass(frozen=True)
class TokenTree:
    """Drafted tokens and their parents (``-1``: a child of the root, the last context token).

    A parent always comes before its children, and siblings are listed in the draft's rank order.
    """

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    draft_probs: torch.Tensor | None = None  # [size, vocab]: what each token was sampled from; None: picked by rank

    def __post_init__(self):
        if len(self.tokens) != len(self.parents):
            raise ValueError(f"{len(self.tokens)} tokens but {len(self.parents)} parents")
        if self.draft_probs is not None and self.draft_probs.shape[0] != len(self.tokens):
            raise ValueError(f"{len(self.tokens)} tokens but {self.draft_probs.shape[0]} draft distributions")
        for i, parent in enumerate(self.parents):
            if not -1 <= parent < i:
                raise ValueError(f"node {i}: parent {parent} must be -1 (the root) or an earlier node")

    @property
    def size(self) -> int:
        """Nodes, i.e. draft tokens the target verifies in one pass (a chain's k)."""
        return len(self.tokens)

    def children(self, node: int) -> list[int]:
        """The nodes hanging from ``node`` (``-1``: the root), in rank order."""
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def ancestors(self, node: int) -> list[int]:
        """``node`` and the nodes above it, root side first."""
        chain = []
        while node != -1:
            chain.append(node)
            node = self.parents[node]
        return chain[::-1]

    def path(self, node: int) -> list[int]:
        """The drafted tokens from the root down to ``node``: the text that node continues."""
        return [self.tokens[i] for i in self.ancestors(node)]

    @property
    def depth(self) -> int:
        """Levels below the root: the most tokens one step can accept (a chain's k)."""
        return max((len(self.ancestors(i)) for i in range(self.size)), default=0)

    def proposal(self, node: int, vocab_size: int) -> torch.Tensor:
        """The distribution node's token was drafted from: one-hot for a token picked by rank."""
        if self.draft_probs is not None:
            return self.draft_probs[node]
        q = torch.zeros(vocab_size, dtype=torch.float64)
        q[self.tokens[node]] = 1.0
        return q

    def attention_mask(self) -> torch.Tensor:
        """``mask[i, j]``: may node i attend to node j? Only to itself and its ancestors.

        With the context (all visible to every node) this is what a tree-attention kernel needs in
        place of the causal mask; for a chain it *is* the causal mask.
        """
        rows = [[False] * self.size for _ in range(self.size)]
        for i in range(self.size):
            for j in self.ancestors(i):
                rows[i][j] = True
        return torch.tensor(rows, dtype=torch.bool).reshape(self.size, self.size)


# --------------------------------------------------------------------------- building trees


def chain(draft: ToyModel, context: Sequence[int], length: int) -> TokenTree:
    """The draft's greedy chain of ``length`` tokens: what vLLM drafts by default."""
    return from_rank_paths(draft, context, [(0,) * depth for depth in range(1, length + 1)])


def best_first(budget: int, top_k: int, scores: Callable[[tuple[int, ...]], list[float]]) -> list[tuple[int, ...]]:
    """Grow a tree of ``budget`` nodes, each time adding the candidate whose path scores highest.

    A node is named by its rank path: ``(0, 1)`` is the second-ranked child of the top-ranked root
    child. ``scores(path)`` gives the ``top_k`` children's scores (chances of being right given the
    path is); a path's score is the product along it, so adding the best candidate first gives the
    tree with the most expected accepted tokens for its size. Returns the paths in the order added
    (every parent before its children).
    """
    if budget < 1 or top_k < 1:
        raise ValueError(f"budget and top_k must be >= 1, got {budget} and {top_k}")
    frontier = [(-s, (r,)) for r, s in enumerate(scores(())[:top_k])]
    heapq.heapify(frontier)
    chosen = []
    while frontier and len(chosen) < budget:
        neg_score, path = heapq.heappop(frontier)
        chosen.append(path)
        for r, s in enumerate(scores(path)[:top_k]):
            heapq.heappush(frontier, (neg_score * s, path + (r,)))
    return chosen


def ranked(draft: ToyModel, context: Sequence[int]) -> tuple[list[int], list[float]]:
    """The draft's next tokens, most likely first, with their probabilities (at temperature 1)."""
    probs, tokens = torch.sort(draft.next_token_probs(context, 1.0), descending=True, stable=True)
    return tokens.tolist(), probs.tolist()


def from_rank_paths(draft: ToyModel, context: Sequence[int], paths: Sequence[tuple[int, ...]],
                    choices: Callable[[list[int]], list[int]] | None = None) -> TokenTree:
    """The tree that rank paths name for this context: path ``(0, 2)`` is the draft's third choice
    after its first choice. The same list format names a static tree in Medusa and EAGLE.
    ``choices(text)`` gives the draft's ranked tokens after ``text`` (default: ``ranked``)."""
    choices = choices or (lambda text: ranked(draft, text)[0])
    index, text = {(): -1}, {(): []}  # a path's node, and the drafted tokens down to it
    tokens, parents = [], []
    for path in sorted(paths, key=len):  # parents first
        if path[:-1] not in index:
            raise ValueError(f"rank path {path} has no parent {path[:-1]} in the tree")
        token = choices(list(context) + text[path[:-1]])[path[-1]]
        index[path], text[path] = len(tokens), text[path[:-1]] + [token]
        tokens.append(token)
        parents.append(index[path[:-1]])
    return TokenTree(tuple(tokens), tuple(parents))


def dynamic_tree(draft: ToyModel, context: Sequence[int], budget: int, top_k: int = 3) -> TokenTree:
    """EAGLE-2's idea: shape the tree for *this* context by the draft's own confidence.

    A path scores the product of the draft's probabilities (at temperature 1) along it, so the
    tree grows deep where the draft is sure and wide where it hesitates.
    """
    seen: dict[tuple, tuple[list[int], list[float]]] = {}  # text -> the draft's ranked tokens and probabilities

    def ranked_after(text):
        if tuple(text) not in seen:
            seen[tuple(text)] = ranked(draft, text)
        return seen[tuple(text)]

    def scores(path):
        text = list(context)
        for r in path:  # follow the ranks down to the path's end
            text.append(ranked_after(text)[0][r])
        return ranked_after(text)[1]

    return from_rank_paths(draft, context, best_first(budget, top_k, scores), lambda text: ranked_after(text)[0])


def sampled_tree(draft: ToyModel, context: Sequence[int], widths: Sequence[int], temperature: float,
                 generator: torch.Generator | None = None) -> TokenTree:
    """SpecInfer's idea: every node at level d gets ``widths[d]`` children *sampled* from the draft
    at the generation's temperature, independently (a token may repeat). ``widths=(1,) * k`` is a
    chain of sampled drafts (vLLM's ``draft_sample_method="probabilistic"``, lesson 01's step)."""
    tokens, parents, probs = [], [], []
    level, text = [-1], {-1: []}
    for width in widths:
        next_level = []
        for parent in level:
            q = draft.next_token_probs(list(context) + text[parent], temperature)
            for _ in range(width):
                node, token = len(tokens), sample(q, generator)
                text[node] = text[parent] + [token]
                tokens.append(token)
                parents.append(parent)
                probs.append(q)
                next_level.append(node)
        level = next_level
    return TokenTree(tuple(tokens), tuple(parents), torch.stack(probs) if probs else None)


def static_paths(accuracy: Sequence[float], budget: int) -> list[tuple[int, ...]]:
    """One fixed tree shape for every step, as Medusa and EAGLE-1 use: a path scores the product of
    how often each rank was the target's choice (``rank_accuracy``, measured once, offline)."""
    return best_first(budget, len(accuracy), lambda path: list(accuracy))


def expected_tokens(paths: Sequence[tuple[int, ...]], accuracy: Sequence[float]) -> float:
    """Tokens a step emits on average if rank r is right with probability ``accuracy[r]`` at every
    level, independently: 1 + the sum over nodes of the chance that the whole path to it is right.
    For the chain ``(0,), (0, 0), ...`` this is ``theory.expected_tokens_per_step``."""
    return 1.0 + sum(math.prod(accuracy[r] for r in path) for path in paths)


def visits(target: ToyModel, temperature: float, steps: int = 400) -> torch.Tensor:
    """How often the target's text sits on each token when it generates at ``temperature``.

    The long-run share of time a bigram chain spends in each state: the average of the first
    ``steps`` powers of its table from a uniform start (an average, so a greedy text that cycles
    counts every token of its cycle alike).
    """
    table = target.table(temperature)
    dist = torch.full((target.vocab_size,), 1.0 / target.vocab_size, dtype=table.dtype)
    total = torch.zeros_like(dist)
    for _ in range(steps):
        dist = dist @ table
        total += dist
    return total / steps


def rank_accuracy(target: ToyModel, draft: ToyModel, top_k: int, temperature: float) -> list[float]:
    """P(the target's next token is the draft's r-th choice), r < top_k, over the target's ``visits``."""
    ranks = torch.argsort(draft.logits, dim=-1, descending=True, stable=True)[:, :top_k]  # [prev, r]
    hits = target.table(temperature).gather(1, ranks)  # p(draft's r-th choice) after each token
    return (visits(target, temperature) @ hits).tolist()


def drafting_acceptance(target: ToyModel, draft: ToyModel, temperature: float) -> dict[str, float]:
    """One draft token's chance of acceptance, over the target's ``visits``, by how it was drafted:
    sampled from q, sum(min(p, q)); the draft's argmax (greedy drafting), p(argmax q)."""
    p, q = target.table(temperature), draft.table(temperature)  # at temperature 0 both drafts are the argmax
    where = visits(target, temperature)
    greedy = p.gather(1, draft.logits.argmax(-1, keepdim=True))[:, 0]
    return {"sampled": float(where @ torch.minimum(p, q).sum(-1)), "greedy": float(where @ greedy)}


# --------------------------------------------------------------------------- verifying trees


def score_tree(target: ToyModel, context: Sequence[int], tree: TokenTree,
               temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's one pass: p after the context (row of the root) and p after each node's path.

    Each node sees the context and, through the mask, only its ancestors; a bigram model needs just
    the last of them, a transformer all of them.
    """
    visible = tree.attention_mask().tolist()
    root = target.next_token_probs(context, temperature)
    nodes = [target.next_token_probs(list(context) + [tree.tokens[j] for j in range(tree.size) if visible[i][j]],
                                     temperature) for i in range(tree.size)]
    return root, torch.stack(nodes) if nodes else root.new_zeros(0, target.vocab_size)


def verify(target: ToyModel, context: Sequence[int], tree: TokenTree, temperature: float,
           generator: torch.Generator | None = None) -> tuple[list[int], int]:
    """Walk the tree from the root, keeping at most one child per level. Returns (emitted, accepted).

    At each node the children are tried in order, each with lesson 01's rule against what is left
    of the target's distribution: r starts as p; child x, drafted from q, is accepted with
    probability min(1, r(x) / q(x)); a rejection leaves r = norm(max(0, r - q)) for the next
    child. If every child is rejected the step ends with a sample from r; below an accepted leaf,
    the target's p there gives a bonus token. For a child picked by rank, q is one-hot: it is
    accepted with probability r(x), and a rejection just removes x from r. The emitted token follows
    p exactly either way. At temperature 0 the child that is the target's argmax is accepted.
    """
    root, rows = score_tree(target, context, tree, temperature)
    node, p, emitted = -1, root, []
    while True:
        remaining = p
        for child in tree.children(node):
            token, q = tree.tokens[child], tree.proposal(child, target.vocab_size)
            u = float(torch.rand((), generator=generator, dtype=torch.float64))
            if u * float(q[token]) < float(remaining[token]):
                emitted.append(token)
                node, p = child, rows[child]
                break
            remaining = residual_distribution(remaining, q)
        else:  # no child, or every child rejected: the target's own token ends the step
            emitted.append(sample(remaining, generator))
            return emitted, len(emitted) - 1


def typical_verify(target: ToyModel, context: Sequence[int], tree: TokenTree, temperature: float,
                   generator: torch.Generator | None = None, epsilon: float = 0.09,
                   delta: float = 0.3) -> tuple[list[int], int]:
    """Medusa-2's typical acceptance: a child is accepted if the target gives it probability above
    min(epsilon, delta * exp(-H(p))), H the entropy of p. The first child (in rank order) that
    passes is kept; if none does, the step ends with a sample from p. Not lossless: a plausible
    token is kept at once, however the target would have weighed it against the others.
    """
    root, rows = score_tree(target, context, tree, temperature)
    node, p, emitted = -1, root, []
    while True:
        entropy = -float((p * torch.log(p.clamp_min(1e-30))).sum())
        threshold = min(epsilon, delta * math.exp(-entropy))
        passing = [c for c in tree.children(node) if float(p[tree.tokens[c]]) > threshold]
        if not passing:
            emitted.append(sample(p, generator))
            return emitted, len(emitted) - 1
        node = passing[0]
        emitted.append(tree.tokens[node])
        p = rows[node]


Builder = Callable[[Sequence[int]], TokenTree]
Verifier = Callable[..., tuple[list[int], int]]


def generate(target: ToyModel, build: Builder, prompt: Sequence[int], n: int, temperature: float = 0.0,
             generator: torch.Generator | None = None, verifier: Verifier = verify) -> tuple[list[int], SpecStats]:
    """Tree speculation for n new tokens: each step builds a tree for the context and verifies it.

    ``build(context)`` returns the step's tree. The stats count the way vLLM counts a chain:
    ``k`` is the tree's size (every step verifies that many draft tokens), and accepted tokens sit
    at positions 1..depth of the path kept.
    """
    context, stats = list(prompt), None
    while len(context) - len(prompt) < n:
        tree = build(context)
        stats = stats or SpecStats(max(tree.size, 1))
        emitted, accepted = verifier(target, context, tree, temperature, generator)
        context += emitted
        stats.record(accepted)
    return context[len(prompt):len(prompt) + n], stats
