"""Result records: arithmetic, report lines, JSON/CSV written whole."""

import json

import pytest

from speclab.algorithms.counters import SpecCounters
from speclab.files import write_atomic
from speclab.measure import equality
from speclab.measure.bench import BenchResult, RunStats, table, why_one_after_another
from speclab.models.profiles import get_profile
from speclab.models.profiles import PROFILES


def _result(spec_ids=None):
    base = RunStats("baseline", 2, 200, 4.0, SpecCounters(), ttft_s=[0.1, 0.3], tpot_s=[0.02, 0.02],
                    token_ids=[[1, 2, 3], [4, 5]], margins=[[4.0, 3.0, 2.0], [5.0, 0.125]])
    spec = RunStats("ngram k=3", 2, 200, 2.5, SpecCounters(40, 120, 60, (30, 20, 10)), ttft_s=[0.1], tpot_s=[0.01],
                    token_ids=spec_ids or [[1, 2, 3], [4, 5]])
    return BenchResult("cpu-tiny", "/m", "ngram", 3, {"method": "ngram", "num_speculative_tokens": 3}, 0.0, 100,
                       "workloads", speculative=spec, baseline=base)


def test_speedup_and_identity():
    r = _result()
    assert r.baseline.output_tokens_per_s == 50.0 and r.speculative.output_tokens_per_s == 80.0
    assert r.speedup == pytest.approx(1.6)
    assert r.outputs_identical is True and r.mismatched_prompts == []
    tie = _result(spec_ids=[[1, 2, 3], [4, 6]])  # parted where the baseline's top two were 0.125 apart
    assert tie.outputs_identical is False and tie.mismatched_prompts == [1] and tie.greedy_check.ok
    clear = _result(spec_ids=[[1, 9, 3], [4, 5]])  # parted where the baseline's choice led by 3.0
    assert clear.mismatched_prompts == [0] and not clear.greedy_check.ok
    assert "CHANGED" in table([clear]) and "1/2 same" in table([tie])


def test_a_speedup_beyond_its_bound_is_not_trusted_in_the_report_and_the_record():
    r = _result()
    assert r.impossible is None and "NOT TRUSTED" not in r.report()
    r.baseline.elapsed_s = 40.0  # a baseline run slowed tenfold by another process: 16x against 2.50
    assert r.speedup == pytest.approx(16.0)
    assert "speedup: 16.00x (NOT TRUSTED: speedup 16.00x is above the acceptance length 2.50" in r.report()
    assert r.to_dict()["speedup_impossible"] == r.impossible


def test_report_has_the_seed_lines():
    text = _result().report()
    for line in ("total_num_output_tokens: 200", "num_drafts: 40", "num_draft_tokens: 120",
                 "num_accepted_tokens: 60", "mean acceptance length: 2.50", "acceptance at token 0: 0.75",
                 "acceptance at token 2: 0.25", "speedup: 1.60x", "greedy outputs: 2 of 2 outputs identical"):
        assert line in text, line


def test_json_and_csv(tmp_path):
    r = _result()
    record = json.loads(r.save_json(tmp_path / "r.json").read_text())
    assert record["speedup"] == pytest.approx(1.6) and record["speculative"]["acceptance_length"] == 2.5
    assert record["speculative"]["per_position_rates"] == [0.75, 0.5, 0.25]
    assert record["baseline"]["ttft_median_s"] == pytest.approx(0.2)
    assert record["greedy_check"] == {"num_prompts": 2, "identical": 2, "ok": True,
                                     "threshold": equality.NEAR_TIE, "divergences": []}
    rows = r.save_csv(tmp_path / "r.csv").read_text().strip().splitlines()
    assert len(rows) == 3 and rows[0].startswith("profile,method,k")
    assert "ngram" in table([r]) and "1.60" in table([r])


def test_write_atomic_keeps_old_file_on_failure(tmp_path):
    path = write_atomic(tmp_path / "x.json", "old")

    class Boom:
        def encode(self):
            raise RuntimeError("disk full")

    with pytest.raises(Exception):
        write_atomic(path, Boom())
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_sweep_from_grid_pairs_each_config_with_the_baseline_of_the_same_group():
    """Lesson 07 reads its k sweep out of a grid whose engines also ran the temperature groups."""
    from speclab.measure import bench

    def stats(label, seconds, ids):
        return RunStats(label, 1, 100, seconds, SpecCounters(), token_ids=[ids], margins=[[4.0] * len(ids)])

    greedy = bench.greedy(100)
    grid = {"baseline": {"T=0.0": stats("b", 4.0, [1, 2]), "T=1.0": stats("b1", 1.0, [7])},
            "ngram k=1": {"T=0.0": stats("k1", 2.0, [1, 2])},
            "ngram k=3": {"T=0.0": stats("k3", 5.0, [1, 2]), "T=1.0": stats("k3t", 1.0, [8])}}
    configs_by_label = {"ngram k=1": {"method": "ngram", "num_speculative_tokens": 1},
                        "ngram k=3": {"method": "ngram", "num_speculative_tokens": 3}}
    sweep = bench.sweep_from_grid(PROFILES["cpu-tiny"], grid, configs_by_label, "T=0.0", greedy)
    assert [(r.k, r.speedup) for r in sweep] == [(1, pytest.approx(2.0)), (3, pytest.approx(0.8))]
    assert all(r.baseline is grid["baseline"]["T=0.0"] and r.greedy_check.ok for r in sweep)


def test_grid_refuses_an_only_that_names_nothing_it_has_before_any_engine():
    from speclab.measure import bench
    from speclab.vllm_layer.configs import ConfigError

    groups = {"T=0.0": ([[1, 2]], bench.greedy(8))}
    for only in ({"ngram k=9": ["T=0.0"]}, {"baseline": ["T=0.5"]}, {"baseline": []}):
        with pytest.raises(ConfigError, match="grid: 'only' names"):
            bench.grid(PROFILES["cpu-tiny"], {"baseline": None}, groups, only=only)


def test_grid_refuses_a_count_of_rounds_that_is_not_a_whole_number_before_any_engine():
    from speclab.measure import bench
    from speclab.vllm_layer.configs import ConfigError

    groups = {"T=0.0": ([[1, 2]], bench.greedy(8))}
    for rounds in (0, -1, 1.5, True, "3"):
        with pytest.raises(ConfigError, match=r"grid: rounds=.*whole number"):
            bench.grid(PROFILES["cpu-tiny"], {"baseline": None}, groups, rounds=rounds)


def test_the_median_round_is_kept_not_the_fastest_or_the_slowest():
    from speclab.measure.bench import median_run

    quiet, usual, disturbed = (RunStats(name, 1, 96, s, SpecCounters()) for name, s in
                               (("quiet", 0.18), ("usual", 0.21), ("disturbed", 0.38)))
    assert median_run([disturbed, quiet, usual]) is usual
    assert median_run([quiet, disturbed]) is disturbed  # of an even count, the slower middle
    assert median_run([quiet]) is quiet
    with pytest.raises(ValueError):
        median_run([])


def test_prompts_are_timed_in_rounds_unless_a_method_drafts_from_earlier_answers():
    from speclab.measure.bench import ONE_AFTER_ANOTHER_ROUNDS, rounds_for
    from speclab.vllm_layer import configs

    stateless = {"baseline": None, "ngram": configs.ngram(3), "eagle": {"method": "eagle", "model": "/m"}}
    assert rounds_for(stateless)[0] == ONE_AFTER_ANOTHER_ROUNDS == 3
    # suffix decoding's second round would be drafted from its first round's answers (lesson 14 times the order)
    rounds, why = rounds_for({**stateless, "suffix": configs.suffix(24)})
    assert rounds == 1 and "suffix" in why


# --- a category measured one prompt at a time (lesson 08) ------------------------------------


def _alone(label, tokens, seconds, counters=SpecCounters(), ids=(1,)):
    return RunStats(label, 1, tokens, seconds, counters, token_ids=[list(ids)], texts=[label],
                    margins=[[4.0] * len(ids)])


def test_combine_adds_prompts_measured_one_after_another():
    from speclab.measure.bench import combine

    a = _alone("a", 100, 2.0, SpecCounters(40, 120, 60, (30, 20, 10)), ids=(1, 2))
    b = _alone("b", 50, 0.5, SpecCounters(10, 30, 20, (9, 7, 4)), ids=(3,))
    both = combine([a, b], "ngram/code")
    assert (both.label, both.num_prompts, both.output_tokens, both.elapsed_s) == ("ngram/code", 2, 150, 2.5)
    assert both.output_tokens_per_s == pytest.approx(60.0)  # total tokens over total time, not a mean of rates
    assert both.counters == SpecCounters(50, 150, 80, (39, 27, 14))
    assert both.counters.acceptance_length == pytest.approx(1 + 80 / 50)
    assert both.token_ids == [[1, 2], [3]] and both.texts == ["a", "b"]
    with pytest.raises(ValueError):
        combine([])


def test_prompt_speedups_and_category_winners():
    from speclab.measure import bench

    per_prompt = {
        "baseline": {"code": [_alone("b", 100, 2.0), _alone("b", 100, 2.0)], "chat": [_alone("b", 100, 1.0)]},
        "ngram": {"code": [_alone("n", 100, 1.0), _alone("n", 100, 2.5)], "chat": [_alone("n", 100, 2.0)]},
        "eagle": {"code": [_alone("e", 100, 1.6), _alone("e", 100, 1.6)], "chat": [_alone("e", 100, 1.25)]},
    }
    each = bench.prompt_speedups(per_prompt)
    assert each == {"ngram": {"code": [2.0, 0.8], "chat": [0.5]}, "eagle": {"code": [1.25, 1.25], "chat": [0.8]}}
    results = {label: {c: bench.combine(runs) for c, runs in cats.items()} for label, cats in per_prompt.items()}
    speedup = bench.speedups(results)
    assert speedup["ngram"]["code"] == pytest.approx(4.0 / 3.5) and speedup["eagle"]["code"] == pytest.approx(1.25)
    winners = bench.category_winners(speedup, each)
    assert winners["code"] == bench.CategoryWinner("eagle", pytest.approx(1.25), 2, 2)
    assert winners["chat"] is None  # both slower than the baseline: speculation is pure cost there
    assert str(winners["code"]) == "eagle 1.25x (faster than the baseline on 2 of 2 prompts)"


def test_grouped_bars_draws_each_prompt_on_its_bar():
    from speclab.measure import plots

    fig = plots.grouped_bars({"code": {"ngram": 1.5, "eagle": 1.2}, "chat": {"ngram": 0.9, "eagle": 1.1}}, "x",
                             points={"code": {"ngram": [1.2, 1.8]}, "chat": {"eagle": [1.0, 1.1, 1.2]}})
    drawn = sorted(tuple(line.get_ydata()) for line in fig.axes[0].lines if len(line.get_ydata()))
    assert drawn == [(1.0, 1.1, 1.2), (1.2, 1.8)]


def test_a_speedup_above_its_acceptance_length_is_flagged_and_cannot_win():
    from speclab.measure import bench

    # ngram on code: acceptance length 1 + 10/10 = 2.0, yet its prompts took 0.6 s against the baseline's 4.0 s:
    # 6.67x, impossible on one machine. eagle on code (1.25x, length 2.0) is plausible and wins instead.
    length2 = SpecCounters(10, 30, 10, (6, 3, 1))
    per_prompt = {
        "baseline": {"code": [_alone("b", 100, 2.0), _alone("b", 100, 2.0)], "chat": [_alone("b", 100, 2.0)]},
        "ngram": {"code": [_alone("n", 100, 0.2, length2), _alone("n", 100, 0.4, length2)],
                  # chat: a category of one prompt with no drafts (length 1.00) at 1.25x: nothing evens it out
                  "chat": [_alone("n", 100, 1.6)]},
        "eagle": {"code": [_alone("e", 100, 1.6, length2), _alone("e", 100, 1.6, length2)],
                  "chat": [_alone("e", 100, 2.5, length2)]},
    }
    flagged = bench.untrusted(per_prompt)
    assert list(flagged) == ["ngram"] and list(flagged["ngram"]) == ["code", "chat"]
    assert "6.67x is above the acceptance length 2.00" in flagged["ngram"]["code"]
    assert "1.25x is above the acceptance length 1.00" in flagged["ngram"]["chat"]
    each = bench.prompt_speedups(per_prompt)
    results = {label: {c: bench.combine(runs) for c, runs in cats.items()} for label, cats in per_prompt.items()}
    speedup = bench.speedups(results)
    assert bench.category_winners(speedup, each)["code"].method == "ngram"  # the fastest figure ...
    assert bench.category_winners(speedup, each, exclude=flagged)["code"].method == "eagle"  # ... is not trusted
    assert bench.category_winners(speedup, each, exclude=flagged)["chat"] is None  # eagle lost there (0.8x)


def test_a_disturbed_prompt_inside_a_plausible_category_is_not_flagged():
    from speclab.measure import bench

    # the third prompt drafted nothing yet ran 1.25x (a slow baseline run of it); the category's total,
    # 300 tokens in 4.6 s against 5.0 s (1.09x) at acceptance length 1 + 20/20 = 2.0, is plausible
    length2 = SpecCounters(20, 60, 20, (12, 6, 2))
    per_prompt = {
        "baseline": {"translation": [_alone("b", 100, 1.5), _alone("b", 100, 1.5), _alone("b", 100, 2.0)]},
        "ngram": {"translation": [_alone("n", 100, 1.5, length2), _alone("n", 100, 1.5), _alone("n", 100, 1.6)]},
    }
    assert bench.prompt_speedups(per_prompt)["ngram"]["translation"][2] == pytest.approx(1.25)
    assert bench.untrusted(per_prompt) == {}


def test_engines_take_turns_only_where_they_fit_side_by_side():
    assert why_one_after_another(get_profile("gpu-tiny"), 2) == "a GPU engine claims most of the card's memory"
    assert why_one_after_another(get_profile("cpu-tiny"), 4) is None  # 4 small CPU engines: a few GiB
    assert why_one_after_another(get_profile("cpu-tiny"), 1000).startswith("1000 engines need about 3500 GiB")
