"""The CPU benchmark's arithmetic by hand, and its refusals (``python -m speclab.measure.cpu_speed``)."""

import pytest

from speclab.algorithms.counters import SpecCounters
from speclab.measure import bench, cpu_speed
from speclab.models.profiles import PROFILES


@pytest.mark.parametrize("argv, message", [
    (["--k", "3,x"], "--k takes different whole numbers >= 1"),
    (["--k", "3,3"], "--k takes different whole numbers >= 1"),
    (["--k", "0"], "--k takes different whole numbers >= 1"),
    (["--layouts", "in-process,threads"], "unknown layout 'threads': choose from in-process, multiprocess"),
])
def test_the_benchmark_refuses_bad_input_before_any_engine(argv, message, capsys):
    assert cpu_speed.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def run(tokens: int, seconds: float, accepted: int = 0, drafts: int = 0) -> bench.RunStats:
    counters = SpecCounters(num_drafts=drafts, num_draft_tokens=3 * drafts, num_accepted_tokens=accepted)
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
    chosen = cpu_speed.method_configs(PROFILES["cpu-tiny"], ["ngram"], [3, 5])
    assert list(chosen) == ["baseline", "ngram k=3", "ngram k=5"] and chosen["baseline"] is None
    assert chosen["ngram k=5"]["num_speculative_tokens"] == 5 and chosen["ngram k=5"]["prompt_lookup_min"] == 2
