"""The CPU step-cost breakdown's arithmetic, by hand (``python -m speclab.cpu_speed --steps``)."""

import pytest

from speclab import cpu_speed, metrics
from speclab.profiles import SpeclabError


def test_a_step_is_one_target_forward_that_emits_one_plus_accepted_tokens():
    counters = metrics.SpecCounters(num_drafts=40, num_draft_tokens=120, num_accepted_tokens=60)
    row = cpu_speed.step_row("ngram k=3", 160, 2.0, counters)
    # 160 tokens, 60 of them accepted drafts: 100 steps of 20 ms, 1.6 tokens and 1.2 draft tokens each
    assert row["steps"] == 100 and row["step_ms"] == pytest.approx(20.0)
    assert row["tokens_per_step"] == pytest.approx(1.6) and row["draft_tokens_per_step"] == pytest.approx(1.2)
    assert row["drafted_share"] == pytest.approx(0.4) and row["tokens_per_s"] == pytest.approx(80.0)
    plain = cpu_speed.step_row("baseline", 96, 1.92, metrics.SpecCounters())
    assert plain["steps"] == 96 and plain["step_ms"] == pytest.approx(20.0) and plain["tokens_per_step"] == 1.0
    with pytest.raises(SpeclabError, match="no steps measured"):
        cpu_speed.step_row("baseline", 0, 1.0, metrics.SpecCounters())


def test_a_batched_step_counts_the_mean_request():
    # 8 requests, 768 tokens, 256 of them accepted: 64 steps per request, 60 ms each in 3.84 s
    counters = metrics.SpecCounters(num_drafts=400, num_draft_tokens=1200, num_accepted_tokens=256)
    row = cpu_speed.step_row("ngram k=3", 768, 3.84, counters, batch=8)
    assert row["mode"] == "batch 8" and row["steps"] == 64 and row["step_ms"] == pytest.approx(60.0)
    assert row["tokens_per_step"] == pytest.approx(1.5) and row["draft_tokens_per_step"] == pytest.approx(1200 / 8 / 64)


def test_the_breakdown_separates_the_runner_from_the_drafts():
    rows = [{"mode": "batch 1", "config": "baseline", "step_ms": 16.0, "draft_tokens_per_step": 0.0},
            {"mode": "batch 1", "config": cpu_speed.NO_DRAFTS, "step_ms": 24.0, "draft_tokens_per_step": 0.0},
            {"mode": "batch 1", "config": "ngram k=1", "step_ms": 26.0, "draft_tokens_per_step": 0.5},
            {"mode": "batch 1", "config": "ngram k=3", "step_ms": 30.0, "draft_tokens_per_step": 1.5},
            {"mode": "batch 8", "config": "baseline", "step_ms": 40.0, "draft_tokens_per_step": 0.0},
            {"mode": "batch 8", "config": cpu_speed.NO_DRAFTS, "step_ms": 42.0, "draft_tokens_per_step": 0.0},
            {"mode": "batch 8", "config": "ngram k=1", "step_ms": 50.0, "draft_tokens_per_step": 1.0},
            {"mode": "batch 8", "config": "ngram k=3", "step_ms": 70.0, "draft_tokens_per_step": 2.0}]
    one, eight = cpu_speed.step_breakdown(rows).values()
    # the k=0 path costs 8 ms more than a plain step; the line through (0.5, 26) and (1.5, 30)
    # has slope 4 ms per draft token and meets zero drafts at 24 ms
    assert (one["plain_step_ms"] == 16.0 and one["no_draft_step_ms"] == 24.0
            and one["runner_overhead_ms"] == pytest.approx(8.0))
    assert one["t_draft_ms"] == pytest.approx(4.0) and one["t_fixed_ms"] == pytest.approx(24.0)
    # batched: (1, 50) and (2, 70): 20 ms per draft token, 30 ms at none; the runner adds 2 ms
    assert eight["runner_overhead_ms"] == pytest.approx(2.0) and eight["t_draft_ms"] == pytest.approx(20.0)
    assert eight["t_fixed_ms"] == pytest.approx(30.0)


def test_fresh_engines_give_the_median_and_every_engine_is_kept():
    rows = [cpu_speed.step_row("x", 100, t, metrics.SpecCounters()) for t in (2.0, 1.0, 3.0)]
    row = cpu_speed.median_step_rows(rows)
    assert row["config"] == "x" and row["step_ms"] == pytest.approx(20.0) and row["step_ms_each"] == [20.0, 10.0, 30.0]


def test_the_breakdown_switches_every_draft_off_with_vllms_schedule():
    chosen = cpu_speed.step_configs([1, 3])
    assert chosen["baseline"] is None and chosen["ngram k=3"]["num_speculative_tokens"] == 3
    off = chosen[cpu_speed.NO_DRAFTS]
    assert off["method"] == "ngram" and off["num_speculative_tokens_per_batch_size"] == [[1, 1, 0]]


@pytest.mark.parametrize("k_values", ["3", "2,2", "1,x", "0,3"])
def test_the_breakdown_needs_two_different_k(k_values, capsys):
    assert cpu_speed.main(["--steps", "--k-values", k_values]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--k-values takes two or more different whole numbers" in err[0]
