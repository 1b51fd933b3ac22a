"""Real vLLM on the CPU profile: speculation must not change greedy output, and must be measured."""

import pytest
from conftest import NGRAM_K, OUTPUT_LEN

from speclab.algorithms import ngram_lookup
from speclab.algorithms.counters import SpecCounters
from speclab.measure import bench, equality, metrics
from speclab.models.profiles import PROFILES
from speclab.vllm_layer import configs

pytestmark = pytest.mark.engine


def test_greedy_output_matches_up_to_near_ties(greedy_runs):
    base, spec = greedy_runs["baseline"], greedy_runs["ngram"]
    assert len(base.token_ids) == 4 and all(base.token_ids)
    assert [len(m) for m in base.margins] == [len(t) for t in base.token_ids]  # logprobs=2 reached every token
    equality.check_runs(base, spec).require()


def test_ngram_accepts_tokens(greedy_runs):
    c = greedy_runs["ngram"].counters
    assert c.num_drafts > 0 and c.num_accepted_tokens > 0
    assert c.num_draft_tokens <= NGRAM_K * c.num_drafts
    assert len(c.accepted_per_pos) == NGRAM_K
    assert list(c.accepted_per_pos) == sorted(c.accepted_per_pos, reverse=True)  # a prefix property
    assert sum(c.accepted_per_pos) == c.num_accepted_tokens
    assert greedy_runs["baseline"].counters.num_drafts == 0


def test_snapshots_measure_two_runs_apart(greedy_runs):
    # the same greedy prompts twice on one engine: each difference covers one run only, and together
    # they make up what the engine counted over both
    first, second = greedy_runs["ngram"].counters, greedy_runs["ngram_again"].counters
    assert first.num_drafts > 0 and second.num_drafts > 0
    assert first + second == greedy_runs["ngram_both"]
    equality.check_runs(greedy_runs["ngram"], greedy_runs["ngram_again"]).require("a second run")


def test_plain_python_lookup_predicts_vllm(greedy_runs, lesson_prompts):
    """Replaying the n-gram run's own output through speclab.algorithms.ngram_lookup predicts vLLM's ngram counters.

    Its own output, not the baseline's: where a near-tie made the two part, vLLM drafted from its own
    text. Drafts and draft tokens match exactly. Accepted tokens match except for answers cut by
    max_tokens, whose last draft may be accepted beyond the end (vLLM counts, then discards them).
    """
    _, inputs = lesson_prompts
    predicted, cut = [], 0
    for inp, out in zip(inputs, greedy_runs["ngram"].token_ids):
        predicted.append(ngram_lookup.replay(inp["prompt_token_ids"], out, k=NGRAM_K, min_n=2, max_n=5))
        cut += len(out) == OUTPUT_LEN
    total = sum(predicted[1:], predicted[0])
    measured = greedy_runs["ngram"].counters
    assert (total.num_drafts, total.num_draft_tokens) == (measured.num_drafts, measured.num_draft_tokens)
    assert total.num_accepted_tokens <= measured.num_accepted_tokens <= total.num_accepted_tokens + NGRAM_K * cut


def test_a_requests_own_counters_add_up_to_the_engines(lesson_prompts):
    from speclab.vllm_layer.engine import open_engine

    _, inputs = lesson_prompts
    with open_engine(PROFILES["cpu-tiny"], configs.ngram(NGRAM_K), enforce_eager=True,
                     per_request_spec_decode_metrics="summary") as llm:
        before = metrics.snapshot(llm)
        run = bench.measure(llm, inputs, bench.greedy(OUTPUT_LEN), "ngram")  # from each request's own
        assert run.counters.num_drafts > 0
        assert run.counters == metrics.snapshot(llm) - before


def test_engines_taking_turns_measure_every_prompt_on_each(lesson_prompts, greedy_runs):
    _, inputs = lesson_prompts
    groups = {str(i): ([inp], bench.greedy(OUTPUT_LEN)) for i, inp in enumerate(inputs)}
    lines = []
    turns = bench.taking_turns(PROFILES["cpu-tiny"], {"baseline": None, "ngram": configs.ngram(NGRAM_K)}, groups,
                               log=lines.append, enforce_eager=True)
    assert lines == ["baseline, ngram: 2 engines open at once, each prompt runs on every one in turn"]
    assert {label: list(runs) for label, runs in turns.items()} == {"baseline": ["0", "1", "2", "3"],
                                                                     "ngram": ["0", "1", "2", "3"]}
    base, ngram = (bench.combine(list(turns[label].values())) for label in ("baseline", "ngram"))
    assert base.counters == SpecCounters()  # the n-gram engine beside it does not count for it
    # the n-gram engine's counters are its own: the same as one engine alone counts for these prompts
    assert ngram.counters.num_drafts > 0
    assert ngram.counters.acceptance_length == pytest.approx(greedy_runs["ngram"].counters.acceptance_length, rel=0.2)
    equality.check_runs(base, ngram).require("engines taking turns")
    equality.check_runs(greedy_runs["baseline"], base).require("a baseline taking turns")


def test_no_engine_process_left(greedy_runs):
    from speclab.vllm_layer.engine import engine_processes

    assert engine_processes() == []
