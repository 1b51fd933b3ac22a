"""Where a step's time goes (``python -m speclab.measure.step_time``): its arithmetic by hand, its configs and
refusals."""

import json

import pytest

from speclab.algorithms.counters import SpecCounters
from speclab.measure import step_time
from speclab.models.profiles import SpeclabError


def test_a_step_is_one_target_forward_that_emits_one_plus_accepted_tokens():
    counters = SpecCounters(num_drafts=40, num_draft_tokens=120, num_accepted_tokens=60)
    row = step_time.step_row("ngram k=3", 160, 2.0, counters)
    # 160 tokens, 60 of them accepted drafts: 100 steps of 20 ms, 1.6 tokens and 1.2 draft tokens each
    assert row["steps"] == 100 and row["step_ms"] == pytest.approx(20.0)
    assert row["tokens_per_step"] == pytest.approx(1.6) and row["draft_tokens_per_step"] == pytest.approx(1.2)
    assert row["drafted_share"] == pytest.approx(0.4) and row["tokens_per_s"] == pytest.approx(80.0)
    plain = step_time.step_row("plain", 96, 1.92, SpecCounters())
    assert plain["steps"] == 96 and plain["step_ms"] == pytest.approx(20.0) and plain["tokens_per_step"] == 1.0
    with pytest.raises(SpeclabError, match="no steps measured"):
        step_time.step_row("plain", 0, 1.0, SpecCounters())


def test_a_batched_step_counts_the_mean_request():
    # 8 requests, 768 tokens, 256 of them accepted: 64 steps per request, 60 ms each in 3.84 s
    counters = SpecCounters(num_drafts=400, num_draft_tokens=1200, num_accepted_tokens=256)
    row = step_time.step_row("ngram k=3", 768, 3.84, counters, batch=8)
    assert row["mode"] == "batch 8" and row["steps"] == 64 and row["step_ms"] == pytest.approx(60.0)
    assert row["tokens_per_step"] == pytest.approx(1.5) and row["draft_tokens_per_step"] == pytest.approx(1200 / 8 / 64)


def test_the_breakdown_separates_the_runner_from_the_drafts():
    rows = [{"mode": "batch 1", "config": step_time.PLAIN, "step_ms": 16.0, "draft_tokens_per_step": 0.0},
            {"mode": "batch 1", "config": step_time.NO_DRAFTS, "step_ms": 24.0, "draft_tokens_per_step": 0.0},
            {"mode": "batch 1", "config": "ngram k=1", "step_ms": 26.0, "draft_tokens_per_step": 0.5},
            {"mode": "batch 1", "config": "ngram k=3", "step_ms": 30.0, "draft_tokens_per_step": 1.5},
            {"mode": "batch 8", "config": step_time.PLAIN, "step_ms": 40.0, "draft_tokens_per_step": 0.0},
            {"mode": "batch 8", "config": step_time.NO_DRAFTS, "step_ms": 42.0, "draft_tokens_per_step": 0.0},
            {"mode": "batch 8", "config": "ngram k=1", "step_ms": 50.0, "draft_tokens_per_step": 1.0},
            {"mode": "batch 8", "config": "ngram k=3", "step_ms": 70.0, "draft_tokens_per_step": 2.0}]
    one, eight = step_time.step_breakdown(rows).values()
    # the k=0 path costs 8 ms more than a plain step; the line through (0.5, 26) and (1.5, 30)
    # has slope 4 ms per draft token and meets zero drafts at 24 ms
    assert (one["plain_step_ms"] == 16.0 and one["no_draft_step_ms"] == 24.0
            and one["runner_overhead_ms"] == pytest.approx(8.0))
    assert one["t_draft_ms"] == pytest.approx(4.0) and one["t_fixed_ms"] == pytest.approx(24.0)
    # batched: (1, 50) and (2, 70): 20 ms per draft token, 30 ms at none; the runner adds 2 ms
    assert eight["runner_overhead_ms"] == pytest.approx(2.0) and eight["t_draft_ms"] == pytest.approx(20.0)
    assert eight["t_fixed_ms"] == pytest.approx(30.0)


def test_ngram_speedup_is_predicted_from_tokens_over_every_step_not_the_acceptance_length(monkeypatch):
    from types import SimpleNamespace

    record = {"k_values": [3], "hardware": step_time.device_name(),  # this machine
              "rows": [{"mode": "batch 1", "config": step_time.PLAIN, "step_ms": 10.0},
                       {"mode": "batch 1", "config": "ngram k=3", "step_ms": 20.0}]}
    # code: 300 tokens, 150 accepted in 50 drafts: 150 steps, a third drafting, 2 tokens a step / 2.0 = 1.00x;
    # chat: 200 tokens, 50 accepted in 20 drafts: acceptance length 3.5, yet 150 steps of 1.33 tokens: 0.67x
    runs = {"code": SimpleNamespace(output_tokens=300, elapsed_s=3.0, counters=SpecCounters(50, 150, 150)),
            "chat": SimpleNamespace(output_tokens=200, elapsed_s=3.0, counters=SpecCounters(20, 60, 50))}
    text = step_time.against({"cpu-tiny": record}, "cpu-tiny", 3, runs, measured={"code": 0.98, "chat": 0.7})
    lines = text.splitlines()
    assert lines[0].startswith("cpu-tiny: an n-gram step at k=3 costs 2.00 plain steps")
    assert lines[2].split() == ["code", "4.00", "33%", "2.00", "1.00x", "0.98x"]
    assert lines[3].split() == ["chat", "3.50", "13%", "1.33", "0.67x", "0.70x"]
    chat = step_time.predict({"cpu-tiny": record}, "cpu-tiny", 3, runs)["chat"]
    assert chat["predicted_speedup"] == pytest.approx(2 / 3) and chat["drafted_share"] == pytest.approx(20 / 150)
    assert step_time.predict({"cpu-tiny": record}, "cpu-tiny", 5, runs) is None
    # step costs from another machine: the table says so, and how to measure this one's
    other = step_time.against({"cpu-tiny": {**record, "hardware": "GPU: 1 x Some Card"}}, "cpu-tiny", 3, runs)
    assert other.splitlines()[1] == (
        f"  the step costs were measured on GPU: 1 x Some Card; this machine is {step_time.device_name()}, so the "
        "prediction can miss here: measure this machine's with python -m speclab.measure.step_time --profile "
        "cpu-tiny --json data/step_time/cpu-tiny.json")
    monkeypatch.setattr(step_time, "device_name", lambda: "GPU: Some Card")
    assert step_time.elsewhere("GPU: 1 x Some Card", "gpu-tiny", "gpu-tiny") == []  # the same card, older spelling


def test_fresh_engines_give_the_median_and_every_engine_is_kept():
    rows = [step_time.step_row("x", 100, t, SpecCounters()) for t in (2.0, 1.0, 3.0)]
    row = step_time.median_step_rows(rows)
    assert row["config"] == "x" and row["step_ms"] == pytest.approx(20.0) and row["step_ms_each"] == [20.0, 10.0, 30.0]


def test_the_breakdown_switches_every_draft_off_with_vllms_schedule():
    chosen = step_time.step_configs([1, 3], gpu=False)
    assert list(chosen) == [step_time.PLAIN, step_time.NO_DRAFTS, "ngram k=1", "ngram k=3"]
    assert chosen[step_time.PLAIN] is None and chosen["ngram k=3"]["num_speculative_tokens"] == 3
    off = chosen[step_time.NO_DRAFTS]
    assert off["method"] == "ngram" and off["num_speculative_tokens_per_batch_size"] == [[1, 1, 0]]
    assert step_time.engine_settings(step_time.PLAIN) == ({}, {})


def test_on_a_gpu_plain_decoding_also_runs_the_way_vllm_runs_ngram():
    chosen = step_time.step_configs([1, 3], gpu=True)
    assert list(chosen)[:2] == [step_time.PLAIN, step_time.AS_NGRAM_RUNS] and chosen[step_time.AS_NGRAM_RUNS] is None
    env, overrides = step_time.engine_settings(step_time.AS_NGRAM_RUNS)
    assert env == {"VLLM_USE_V2_MODEL_RUNNER": "0"} and overrides == {"async_scheduling": False}


BREAKDOWN = {"plain_step_ms": 2.0, "as_ngram_runs_ms": 3.0, "no_draft_step_ms": 5.0, "runner_overhead_ms": 3.0,
             "t_fixed_ms": 5.0, "t_draft_ms": 0.5}


def record(model="smollm2-135m-instruct", weights=None, hardware="GPU: H100", plain=2.0, k_steps=None):
    """A stored measurement: batch-1 rows for plain decoding and n-gram at each k ({k: step ms})."""
    k_steps = k_steps or {1: 5.5, 3: 6.5}
    rows = [{"mode": "batch 1", "config": step_time.PLAIN, "step_ms": plain}]
    rows += [{"mode": "batch 1", "config": f"ngram k={k}", "step_ms": ms} for k, ms in k_steps.items()]
    return {"model": model, "weights": weights, "hardware": hardware, "k_values": list(k_steps),
            "breakdown": {"batch 1": {**BREAKDOWN, "plain_step_ms": plain}}, "rows": rows}


def test_a_steps_cost_is_its_measured_time_in_plain_steps():
    # a k=3 step took 6.5 ms where a plain one took 2 ms: 3.25 plain steps; k=5 was not measured
    assert step_time.cost_in_plain_steps(record(), 3) == pytest.approx(3.25)
    assert step_time.cost_in_plain_steps(record(), 5) is None


def test_the_lessons_table_reads_every_stored_record_cpu_first_then_smollm2_on_a_gpu(tmp_path):
    cpu = record(hardware="CPU: 2 cores", plain=30.0, k_steps={1: 33.0, 3: 42.0})
    cpu["breakdown"]["batch 1"]["as_ngram_runs_ms"] = None
    llama = record(model="meta-llama/Llama-3.1-8B-Instruct", weights="random weights", plain=6.0,
                   k_steps={1: 8.0, 3: 9.0})
    for name, r in {"gpu-llama8b-random": llama, "gpu-tiny": record(), "cpu-tiny": cpu}.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(r))
    records = step_time.stored(tmp_path)
    assert list(records) == ["cpu-tiny", "gpu-tiny", "gpu-llama8b-random"]
    head, first, second, third = step_time.lesson_table(records, k=3).splitlines()
    assert "a k=3 step" in head and "k=1" in head
    assert first.startswith("smollm2-135m-instruct ") and first.endswith("CPU: 2 cores") and first.split()[3] == "-"
    assert "42.00 ms  1.40 plain steps" in first  # 42 / 30
    assert "3.00 ms" in second and "3.25 plain steps" in second
    assert third.startswith("Llama-3.1-8B-Instruct (random) ") and "1.50 plain steps" in third


def test_a_profile_without_a_stored_step_cost_or_k_says_how_to_measure_it():
    records = {"gpu-tiny": record()}  # measured at k = 1 and 3
    assert step_time.against(records, "gpu-tiny", 4, {}).endswith("measured at k = 1, 3, not at k=4")
    missing = step_time.against(records, "cpu-tiny", 3, {})
    assert missing.startswith("no stored step-time measurement for cpu-tiny: python -m speclab.measure.step_time")


def test_the_stored_measurements_cover_smollm2_on_both_devices_and_an_8b_target():
    """What the lessons will print: every record read back whole, its k=3 step measured."""
    records = step_time.stored()
    assert {"cpu-tiny", "gpu-tiny", "gpu-llama8b-random"} <= set(records)
    for name, r in records.items():
        assert step_time.cost_in_plain_steps(r, 3) > 1.0, name  # a speculative step never costs less than a plain one
        assert r["environment"]["vllm"] and r["hardware"]
