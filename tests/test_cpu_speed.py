"""The CPU step-cost breakdown's arithmetic, by hand (``python -m speclab.cpu_speed --steps``)."""

import pytest

from speclab import bench, cpu_speed, metrics
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
    assert cpu_speed.main(["--steps", "--k", k_values]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--k takes two or more different whole numbers" in err[0]


@pytest.mark.parametrize("argv, message", [
    (["--k", "3,x"], "--k takes different whole numbers >= 1"),
    (["--k", "0"], "--k takes different whole numbers >= 1"),
    (["--layouts", "in-process,threads"], "unknown layout 'threads': choose from in-process, multiprocess"),
    (["--steps", "--layouts", "in-process,multiprocess"], "--steps times one layout"),
])
def test_the_benchmark_refuses_bad_input_before_any_engine(argv, message, capsys):
    assert cpu_speed.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def run(tokens: int, seconds: float, accepted: int = 0, drafts: int = 0) -> bench.RunStats:
    counters = metrics.SpecCounters(num_drafts=drafts, num_draft_tokens=3 * drafts, num_accepted_tokens=accepted)
    return bench.RunStats("x", 1, tokens, seconds, counters)


def test_one_engines_runs_give_batch_1_per_category_and_over_all():
    # four prompts alone: two summarisation (96 tokens in 4 s, 96 in 2 s), two code (96 in 1 s each)
    alone = [run(96, 4.0, 30, 20), run(96, 2.0, 30, 20), run(96, 1.0, 60, 30), run(96, 1.0, 60, 30)]
    together = run(384, 2.0)
    modes = cpu_speed.by_mode(["summarisation", "summarisation", "code", "code"], alone, together)
    assert list(modes) == [("batch 1", "all"), ("batch 1", "summarisation"), ("batch 1", "code"), ("batched", "all")]
    assert modes[("batch 1", "all")].output_tokens_per_s == pytest.approx(384 / 8.0)
    assert modes[("batch 1", "summarisation")].output_tokens_per_s == pytest.approx(192 / 6.0)
    assert modes[("batch 1", "code")].output_tokens_per_s == pytest.approx(96.0)
    # 192 tokens, 120 of them accepted drafts, in 60 drafts: 1 + 120 / 60 = 3 tokens per draft
    assert modes[("batch 1", "code")].counters.acceptance_length == pytest.approx(3.0)
    assert modes[("batched", "all")] is together
    one_category = cpu_speed.by_mode(["code"] * 4, alone, together)
    assert list(one_category) == [("batch 1", "all"), ("batched", "all")]


def test_rows_hold_medians_over_fresh_engines_and_speedups_against_the_baseline_median():
    def engine(seconds_alone: float, seconds_together: float, accepted: int = 0, drafts: int = 0) -> dict:
        return {("batch 1", "all"): run(100, seconds_alone, accepted, drafts),
                ("batched", "all"): run(400, seconds_together, accepted, drafts)}
    per_engine = {"baseline": [engine(4.0, 2.0), engine(5.0, 2.0), engine(2.0, 4.0)],  # 25 / 20 / 50 tok/s alone
                  "ngram k=3": [engine(2.0, 4.0, 50, 25), engine(1.0, 2.0, 50, 25), engine(2.5, 8.0, 50, 25)]}
    rows = cpu_speed.summarise({"layout": "in-process", "reserved_cpus": "default"}, per_engine)
    by = {(r["method"], r["mode"]): r for r in rows}
    assert [(r["mode"], r["method"]) for r in rows] == [("batch 1", "baseline"), ("batch 1", "ngram k=3"),
                                                       ("batched", "baseline"), ("batched", "ngram k=3")]
    base, ngram = by[("baseline", "batch 1")], by[("ngram k=3", "batch 1")]
    assert base["tokens_per_s"] == pytest.approx(25.0) and base["tokens_per_s_each"] == [25.0, 20.0, 50.0]
    assert base["speedup"] == pytest.approx(1.0) and base["acceptance_length"] is None
    # n-gram alone: 50, 100, 40 tok/s -> median 50, against the baseline's median 25
    assert ngram["tokens_per_s"] == pytest.approx(50.0) and ngram["speedup"] == pytest.approx(2.0)
    assert ngram["acceptance_length"] == pytest.approx(3.0) and ngram["layout"] == "in-process"
    # batched: baseline 200, 200, 100 -> 200; n-gram 100, 200, 50 -> 100: 0.5x
    assert by[("ngram k=3", "batched")]["speedup"] == pytest.approx(0.5)


def test_every_method_runs_at_every_k_after_the_baseline():
    chosen = cpu_speed.method_configs("cpu-tiny", ["ngram"], [3, 5])
    assert list(chosen) == ["baseline", "ngram k=3", "ngram k=5"] and chosen["baseline"] is None
    assert chosen["ngram k=5"]["num_speculative_tokens"] == 5 and chosen["ngram k=5"]["prompt_lookup_min"] == 2
