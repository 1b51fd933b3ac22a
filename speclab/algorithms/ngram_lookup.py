"""N-gram prompt lookup in plain Python, to see exactly what vLLM's ``ngram`` method does.

The proposer looks for the longest n-gram (``min_n <= n <= max_n``) that ends the context and
also occurs earlier in it; the k tokens that followed that earlier occurrence are the draft.
Among equally long matches vLLM takes the earliest one, and so do we. ``replay`` runs the
proposer over a finished greedy generation and counts what a speculative run would have
accepted: for greedy decoding this predicts vLLM's counters without starting an engine. Lesson 02 writes
``propose`` and ``replay`` out in its own cells (tests/test_lesson02_definitions.py holds them to these).
"""

from __future__ import annotations

from typing import Callable, Sequence

from .counters import SpecCounters


def propose(tokens: Sequence[int], k: int, min_n: int = 2, max_n: int = 5) -> list[int]:
    """Draft up to k tokens by prompt lookup; an empty list when no n-gram matches."""
    tokens = list(tokens)
    total = len(tokens)
    for n in range(min(max_n, total - 1), min_n - 1, -1):
        suffix = tokens[total - n:]
        for start in range(0, total - n):  # earliest occurrence first, never the suffix itself
            if tokens[start:start + n] == suffix:
                return tokens[start + n:start + n + k]
    return []


def replay(prompt: Sequence[int], output: Sequence[int], k: int, min_n: int = 2, max_n: int = 5) -> SpecCounters:
    """Counters a greedy ngram run would report for ``output``, the target's own greedy answer.

    The first output token comes from the prefill step, undrafted. After that, each step drafts
    from prompt + output so far; the target accepts the drafted tokens that equal its own next
    tokens, up to the first miss, then adds one token. Like vLLM, a step drafts the full k tokens
    even when max_tokens will cut the answer sooner; the tokens vLLM then accepts beyond the end
    of ``output`` are unknown here, so for an answer cut by max_tokens the replay can count up to
    k accepted tokens fewer than vLLM (an answer that ended with EOS replays exactly).
    """
    return replay_with(lambda context: propose(context, k, min_n, max_n), prompt, output, k)


def replay_with(draft: Callable[[list[int]], list[int]], prompt: Sequence[int], output: Sequence[int],
                k: int) -> SpecCounters:
    """``replay`` for any proposer: ``draft(context)`` returns at most k tokens (none: a plain step)."""
    context = list(prompt) + list(output[:1])
    output = list(output)
    drafts = draft_tokens = accepted_total = 0
    per_pos = [0] * k
    t = 1
    while t < len(output):
        guess_tokens = draft(context)[:k]
        accepted = 0
        for guess, truth in zip(guess_tokens, output[t:]):
            if guess != truth:
                break
            accepted += 1
        if guess_tokens:
            drafts += 1
            draft_tokens += len(guess_tokens)
            accepted_total += accepted
            for i in range(accepted):
                per_pos[i] += 1
        step = accepted + 1
        context += output[t:t + step]
        t += step
    return SpecCounters(drafts, draft_tokens, accepted_total, tuple(per_pos))
