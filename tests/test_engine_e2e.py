"""Real vLLM on the CPU profile: speculation must not change greedy output, and must be measured."""

import psutil
import pytest

from conftest import NGRAM_K
from speclab import lookup

pytestmark = pytest.mark.engine


def test_greedy_output_identical_token_for_token(greedy_runs):
    base, spec = greedy_runs["baseline"], greedy_runs["ngram"]
    assert len(base.token_ids) == 4 and all(base.token_ids)
    assert spec.token_ids == base.token_ids


def test_ngram_accepts_tokens(greedy_runs):
    c = greedy_runs["ngram"].counters
    assert c.num_drafts > 0 and c.num_accepted_tokens > 0
    assert c.num_draft_tokens <= NGRAM_K * c.num_drafts
    assert len(c.accepted_per_pos) == NGRAM_K
    assert list(c.accepted_per_pos) == sorted(c.accepted_per_pos, reverse=True)  # a prefix property
    assert sum(c.accepted_per_pos) == c.num_accepted_tokens
    assert greedy_runs["baseline"].counters.num_drafts == 0


def test_snapshots_measure_two_runs_apart(greedy_runs):
    # the same greedy prompts twice on one engine: each difference covers one run only
    assert greedy_runs["ngram_again"].counters == greedy_runs["ngram"].counters
    assert greedy_runs["ngram_again"].token_ids == greedy_runs["ngram"].token_ids


def test_plain_python_lookup_predicts_vllm(greedy_runs, lesson_prompts):
    _, inputs = lesson_prompts
    predicted = None
    for inp, out in zip(inputs, greedy_runs["baseline"].token_ids):
        c = lookup.replay(inp["prompt_token_ids"], out, k=NGRAM_K, min_n=2, max_n=5)
        predicted = c if predicted is None else predicted + c
    measured = greedy_runs["ngram"].counters
    assert predicted.num_accepted_tokens == measured.num_accepted_tokens
    assert predicted.num_drafts == measured.num_drafts


def test_no_engine_process_left(greedy_runs):
    names = [p.name() for p in psutil.Process().children(recursive=True)]
    assert not [n for n in names if "EngineCore" in n or "VLLM" in n or "Worker" in n], names
