"""gpu-synthetic: shape folders, imposed-acceptance configs, version checks, the stored GPU runs."""

import json
from pathlib import Path

import pytest

from speclab.measure import synthetic
from speclab.models.model_refs import resolve_model
from speclab.models.profiles import SpeclabError, cuda_available, get_profile
from speclab.vllm_layer import validation
from speclab.vllm_layer.configs import ConfigError

ALL_FIELDS = set(synthetic.SYNTHETIC_FIELDS) | {"method", "model", "num_speculative_tokens"}


def test_shape_reference_resolves_to_a_config_only_folder():
    folder = Path(resolve_model("shape:llama-3.1-8b"))
    assert sorted(p.name for p in folder.iterdir()) == ["config.json"]
    assert json.loads((folder / "config.json").read_text())["num_hidden_layers"] == 32
    profile = get_profile("gpu-synthetic")
    assert Path(resolve_model(profile.drafter("draft_model"))).name == "llama-3.2-1b"
    assert synthetic.engine_overrides() == {"load_format": "dummy", "skip_tokenizer_init": True}


def test_rates_are_powers_of_a():
    assert synthetic.acceptance_rates(0.8, 3) == pytest.approx([0.8, 0.64, 0.512])
    with pytest.raises(SpeclabError, match="must lie in"):
        synthetic.acceptance_rates(1.5, 2)


def test_config_imposes_rates_or_a_length():
    cfg = synthetic.config("draft_model", 3, a=0.5, check=False)
    assert cfg["method"] == "draft_model" and Path(cfg["model"]).name == "llama-3.2-1b"
    assert cfg["rejection_sample_method"] == "synthetic"
    assert cfg["synthetic_acceptance_rates"] == pytest.approx([0.5, 0.25, 0.125])
    assert synthetic.imposed_length(cfg) == pytest.approx(1.875)
    eagle3 = synthetic.config("eagle3", 2, acceptance_length=2.2, check=False)
    assert Path(eagle3["model"]).name == "eagle3-llama3.1-8b" and eagle3["synthetic_acceptance_length"] == 2.2
    assert "synthetic_acceptance_rates" not in eagle3
    with pytest.raises(ConfigError, match="exactly one"):
        synthetic.config("draft_model", 2, a=0.8, acceptance_length=2.0, check=False)
    with pytest.raises(ConfigError, match=r"\[1, 3\]"):
        synthetic.config("draft_model", 2, acceptance_length=3.5, check=False)


def test_support_names_what_is_missing():
    assert synthetic.support(ALL_FIELDS, device="cuda") is None
    reason = synthetic.support(ALL_FIELDS - {"synthetic_acceptance_rates"}, device="cuda")
    assert "no synthetic acceptance (missing synthetic_acceptance_rates)" in reason
    assert "GPU-only" in synthetic.support(ALL_FIELDS, device="cpu")


def test_installed_vllm_has_the_fields():
    pytest.importorskip("vllm")
    assert set(synthetic.SYNTHETIC_FIELDS) <= synthetic.speculative_config_fields()


@pytest.mark.skipif(cuda_available(), reason="checks the CPU refusal")
def test_cpu_refuses_with_one_line():
    with pytest.raises(ConfigError, match="GPU-only") as err:
        synthetic.config("draft_model", 2, a=0.8)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="GPU-only"):  # also a hand-written config, before any engine starts
        validation.validate(synthetic.config("draft_model", 2, a=0.8, check=False), version=(0, 32, 0))


def test_vllm_config_takes_the_synthetic_settings(monkeypatch):
    """vLLM's own SpeculativeConfig resolves our dict (config only: no engine, no GPU)."""
    arg_utils = pytest.importorskip("vllm.engine.arg_utils")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = synthetic.config("draft_model", 3, a=0.7, check=False)
    cfg = arg_utils.EngineArgs(model=synthetic.model_dir("shape:llama-3.1-8b"), max_model_len=2048, enforce_eager=True,
                               speculative_config=spec, **synthetic.engine_overrides()).create_engine_config()
    assert cfg.speculative_config.rejection_sample_method == "synthetic"
    assert cfg.speculative_config.synthetic_acceptance_rates == pytest.approx([0.7, 0.49, 0.343])


def test_token_prompts_are_reproducible_ids():
    prompts = synthetic.token_prompts(3, 16, seed=1)
    assert prompts == synthetic.token_prompts(3, 16, seed=1) != synthetic.token_prompts(3, 16, seed=2)
    ids = [t for p in prompts for t in p["prompt_token_ids"]]
    assert len(ids) == 48 and all(1000 <= t < 120000 for t in ids)


def test_stored_references_load_and_label_acceptance_as_imposed():
    names = synthetic.list_references()
    assert "speedup_surface" in names and "methods" in names
    for name in names:
        ref = synthetic.load_reference(name)
        assert "imposed by hand" in ref["note"] and ref["environment"]["vllm"]
        assert "imposed by hand" in synthetic.describe(ref)
    with pytest.raises(SpeclabError, match="run python -m speclab.measure.gpu_sweep"):
        synthetic.load_reference("no-such-run")


def test_methods_reference_compares_drafters_at_equal_acceptance():
    ref = synthetic.load_reference("methods")
    eagle = synthetic.runs(ref, method="eagle", k=4, batch=1)
    assert eagle and eagle[0]["acceptance_length"] == pytest.approx(eagle[0]["imposed_length"], rel=0.06)


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")
def test_one_engine_on_the_gpu(tmp_path):
    """A short real sweep: baseline and one draft_model setting at batch 1 (about two minutes)."""
    from speclab.measure import gpu_sweep

    plan = gpu_sweep.surface_plan(grid=((2, 0.8),))
    rows = []
    for engine in plan:
        rows += gpu_sweep.measure_engine(get_profile("gpu-synthetic"), engine, [1], 64, 64, {1: 1},
                                         {"max_model_len": 2048, "max_num_seqs": 4})
    spec = gpu_sweep.with_speedups(rows)[-1]
    assert spec["acceptance_length"] == pytest.approx(2.44, rel=0.1) and spec["speedup"] > 0


def test_tp2_reference_records_what_vllm_refuses():
    ref = synthetic.load_reference("tp2")
    assert len(ref["environment"]["gpus"]) == 2
    tp2 = {r["batch"]: r for r in synthetic.runs(ref, method="baseline", tensor_parallel_size=2)}
    tp1 = {r["batch"]: r for r in synthetic.runs(synthetic.load_reference("speedup_surface"), method="baseline")}
    assert tp2[1]["step_ms"] < tp1[1]["step_ms"]  # two GPUs read half the weights each
    refused = [e for e in ref["errors"] if "draft_tp=1" in e["label"] and e["label"].startswith("draft_model")]
    assert refused and "runs the draft with the target's tensor parallel size" in refused[0]["error"]


def test_a_point_is_the_median_of_fresh_engines():
    """Three engines of one config -> per batch size the median timing, each engine's own, and the spread."""
    from speclab.measure import gpu_sweep

    def engine(tps_1, tps_16):
        return [{"label": "x", "batch": b, "tokens_per_s": t, "step_ms": 1000 / t, "elapsed_s": 256 / t,
                 "engine_start_s": 50.0, "acceptance_length": 2.0} for b, t in ((1, tps_1), (16, tps_16))]

    rows = gpu_sweep.median_rows([engine(100.0, 1000.0), engine(120.0, 900.0), engine(90.0, 1100.0)])
    assert [r["batch"] for r in rows] == [1, 16]
    assert rows[0]["tokens_per_s"] == 100.0 and rows[1]["tokens_per_s"] == 1000.0
    assert rows[0]["step_ms"] == 10.0 and rows[0]["acceptance_length"] == 2.0
    assert [e["tokens_per_s"] for e in rows[0]["engines"]] == [100.0, 120.0, 90.0]
    assert rows[0]["spread"] == round(120 / 90 - 1, 4) and rows[1]["spread"] == round(1100 / 900 - 1, 4)


def test_a_rerun_measures_again_the_points_stored_from_fewer_engines():
    """Rows of an older single-engine sweep (no ``engines``) or of too few engines are not 'done'."""
    from speclab.measure import gpu_sweep

    three = [{"tokens_per_s": 1.0}] * 3
    doc = {"runs": [{"label": "baseline", "batch": 1, "engines": three},
                    {"label": "baseline", "batch": 16, "engines": three},
                    {"label": "old", "batch": 1}, {"label": "two", "batch": 1, "engines": three[:2]},
                    {"label": "mixed", "batch": 1, "engines": three}, {"label": "mixed", "batch": 16}]}
    assert gpu_sweep.measured_labels(doc, 3) == {"baseline"}
    assert gpu_sweep.measured_labels(doc, 2) == {"baseline", "two"}
    assert gpu_sweep.measured_labels(doc, 1) == {"baseline", "old", "two", "mixed"}
    assert gpu_sweep.measured_labels({}, 3) == set()


def _row(label, method, k, batch, tps, engines=None, a=0.8):
    row = {"label": label, "method": method, "k": k, "a": a, "batch": batch, "tensor_parallel_size": 1,
           "tokens_per_s": tps, "step_ms": 1000 / tps, "acceptance_length": 1 + k * a, "imposed_length": 1 + k * a}
    if engines:
        row["engines"] = [{"tokens_per_s": t, "step_ms": 1000 / t, "elapsed_s": 1.0} for t in engines]
    return row


def test_fastest_engines_takes_each_points_fastest_engine_and_recomputes_speedups():
    ref = {"runs": [_row("baseline", "baseline", 0, 1, 100.0, [98.0, 100.0, 101.0]),
                    _row("d k=2", "draft_model", 2, 1, 120.0, [120.0, 80.0, 150.0]),
                    _row("old", "draft_model", 4, 1, 90.0)]}  # no engines: kept as stored
    fast = synthetic.fastest_engines(ref)
    by_label = {r["label"]: r for r in fast["runs"]}
    assert by_label["baseline"]["tokens_per_s"] == 101.0 and by_label["d k=2"]["step_ms"] == pytest.approx(1000 / 150)
    assert by_label["d k=2"]["speedup"] == pytest.approx(150 / 101, abs=1e-5)
    assert by_label["old"]["speedup"] == pytest.approx(90 / 101, abs=1e-5)
    assert ref["runs"][1]["tokens_per_s"] == 120.0 and "speedup" not in ref["runs"][1]  # the stored medians untouched


def test_speedup_table_can_fit_on_one_view_and_judge_another():
    # step times (ms) 1000/tps: fastest view k=2 -> 5, k=4 -> 7 (line 3 + 1 per token), baseline 4 ms
    ref = {"runs": [_row("baseline", "baseline", 0, 1, 250.0, [250.0, 250.0, 250.0]),
                    _row("d k=2", "draft_model", 2, 1, 100.0, [100.0, 200.0, 100.0]),
                    _row("d k=3", "draft_model", 3, 1, 100.0, [100.0, 1000 / 6, 100.0]),
                    _row("d k=4", "draft_model", 4, 1, 100.0, [1000 / 7, 100.0, 100.0])]}
    synthetic.with_speedups(ref["runs"])
    fast = synthetic.fastest_engines(ref)
    judged = {r["k"]: r for r in synthetic.speedup_table(ref, fit=fast)}
    # leave-one-out on the fast view for k=3: line through (2, 5) and (4, 7) -> 6 ms; tokens 1 + 0.8 + 0.64 + 0.512
    tokens = 1 + 0.8 + 0.64 + 0.512
    assert judged[3]["cost_model"] == pytest.approx(tokens * 4 / 6)
    assert judged[3]["measured"] == pytest.approx(0.4)  # the median engine: 100 tok/s over 250
    own = {r["k"]: r for r in synthetic.speedup_table(fast)}
    assert own[3]["measured"] == pytest.approx((1000 / 6) / 250, abs=1e-5)


def test_a_part_without_a_baseline_takes_the_surfaces(tmp_path):
    from speclab.measure import gpu_sweep

    settings = {"engine": {"load_format": "dummy", "max_num_seqs": 64}}
    base = _row("baseline", "baseline", 0, 1, 200.0, [199.0, 200.0, 203.0])
    (tmp_path / "speedup_surface.json").write_text(json.dumps({"settings": settings, "runs": [base]}))
    doc = {"settings": settings, "runs": [_row("baseline", "baseline", 0, 1, 150.0), _row("e", "eagle", 4, 1, 400.0)]}
    gpu_sweep.use_baseline(doc, gpu_sweep.surface_baseline(doc, tmp_path))
    synthetic.with_speedups(doc["runs"])
    assert [r["tokens_per_s"] for r in doc["runs"] if r["method"] == "baseline"] == [200.0]
    assert doc["runs"][0]["speedup"] == 2.0 and doc["baseline_from"] == "speedup_surface"
    other = {"settings": {"engine": {"max_num_seqs": 8}}, "runs": [_row("e", "eagle", 4, 1, 400.0)]}
    # other engine settings: not the same measurement
    gpu_sweep.use_baseline(other, gpu_sweep.surface_baseline(other, tmp_path))
    assert len(other["runs"]) == 1 and "baseline_from" not in other
    # a surface without a baseline leaves the part's own in place
    (tmp_path / "speedup_surface.json").write_text(json.dumps({"settings": settings, "runs": []}))
    own = {"settings": settings, "runs": [_row("baseline", "baseline", 0, 1, 150.0)]}
    gpu_sweep.use_baseline(own, gpu_sweep.surface_baseline(own, tmp_path))
    assert [r["tokens_per_s"] for r in own["runs"]] == [150.0] and "baseline_from" not in own


def test_block_drafting_plan_times_both_drafters_on_the_qwen3_shape():
    from speclab.measure import gpu_sweep

    plan = gpu_sweep.block_drafting_plan(ks=(3, 15))
    assert [(e.method, e.k) for e in plan] == [("baseline", 0), ("eagle3", 3), ("eagle3", 15), ("dflash", 3),
                                               ("dflash", 15)]
    assert {e.target for e in plan} == {"shape:qwen3-8b"}
    assert {e.draft for e in plan if e.method == "dflash"} == {"shape:dflash-qwen3-8b"}


def test_block_drafting_reference_holds_acceptance_equal_between_drafters():
    ref = synthetic.load_reference("block_drafting")
    assert ref["target"] == "shape:qwen3-8b" and not ref["errors"]
    for batch in (1, 16):
        for k in (3, 7, 15):
            eagle3, dflash = (synthetic.runs(ref, method=m, k=k, batch=batch)[0] for m in ("eagle3", "dflash"))
            assert eagle3["imposed_length"] == dflash["imposed_length"]
            # speedup: tokens per second over the baseline's at the same batch
            base = synthetic.runs(ref, method="baseline", batch=batch)[0]
            assert dflash["speedup"] == pytest.approx(dflash["tokens_per_s"] / base["tokens_per_s"], rel=1e-3)
