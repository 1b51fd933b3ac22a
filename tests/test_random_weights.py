"""Random weights: a GPU profile's models become their published shapes, and every result says so."""

import json

import pytest

from speclab.measure import report
from speclab.models import model_refs, random_weights, shapes
from speclab.models.profiles import PROFILES, SpeclabError, get_profile
from speclab.vllm_layer import configs, engine, validation


@pytest.fixture
def random_mode(monkeypatch):
    monkeypatch.setenv(random_weights.ENV, "random")
    monkeypatch.setattr(random_weights, "_loaded_random", False)


def test_the_mode_comes_from_one_variable(monkeypatch):
    monkeypatch.delenv(random_weights.ENV, raising=False)
    assert random_weights.mode() == "real" and not random_weights.is_random()
    monkeypatch.setenv(random_weights.ENV, " Random ")
    assert random_weights.is_random()
    monkeypatch.setenv(random_weights.ENV, "dummy")
    with pytest.raises(SpeclabError, match="set it to real or random"):
        random_weights.mode()


def test_measurements_of_random_weights_are_stored_under_their_own_name(monkeypatch):
    monkeypatch.delenv(random_weights.ENV, raising=False)
    assert random_weights.stored_name("gpu-llama8b") == "gpu-llama8b"
    assert random_weights.stored_name("gpu-llama8b", random=True) == "gpu-llama8b-random"
    monkeypatch.setenv(random_weights.ENV, "random")
    assert random_weights.stored_name("gpu-qwen3-8b") == "gpu-qwen3-8b-random"
    assert random_weights.stored_name("gpu-qwen3-8b", random=False) == "gpu-qwen3-8b"


def test_every_model_of_the_gpu_profiles_has_a_shape():
    """gpu-llama8b and gpu-qwen3-8b must run every cell on random weights: each model needs its shape."""
    for name in ("gpu-llama8b", "gpu-qwen3-8b"):
        profile = get_profile(name)
        for ref in [profile.target, *profile.drafters.values()]:
            shape = random_weights.shape_for(ref)
            assert shape.startswith("shape:") and random_weights.is_weightless(shapes.shape_dir(shape)), ref


def test_shape_for_passes_folders_and_speclab_models_through(tmp_path):
    assert random_weights.shape_for(str(tmp_path)) == str(tmp_path)
    assert random_weights.shape_for("local:smollm2-135m-instruct") == "local:smollm2-135m-instruct"
    assert random_weights.shape_for("meta-llama/Llama-3.2-1B-Instruct") == "shape:llama-3.2-1b"
    with pytest.raises(SpeclabError, match="no published shape for 'org/unknown'"):
        random_weights.shape_for("org/unknown")


def test_a_folder_with_weights_is_not_weightless(tmp_path):
    assert not random_weights.is_weightless(tmp_path)  # no config.json: not a model folder at all
    (tmp_path / "config.json").write_text("{}")
    assert random_weights.is_weightless(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert not random_weights.is_weightless(tmp_path)


def test_random_weights_resolve_hub_ids_to_shapes(random_mode):
    assert model_refs.resolve_model("Qwen/Qwen3-8B") == str(shapes.shape_dir("qwen3-8b"))
    assert model_refs.target_path(PROFILES["gpu-llama8b"]) == str(shapes.shape_dir("llama-3.1-8b"))
    config = engine.resolve_drafter(configs.for_profile(PROFILES["gpu-qwen3-8b"], "eagle3", 3))
    assert config["model"] == str(shapes.shape_dir("eagle3-qwen3-8b"))
    validation.validate(config, target=model_refs.target_path(PROFILES["gpu-qwen3-8b"]))  # the head fits its width


def test_real_weights_leave_hub_ids_alone(monkeypatch):
    monkeypatch.delenv(random_weights.ENV, raising=False)
    assert model_refs.resolve_model("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"


def test_an_engine_on_a_shape_loads_random_weights_with_smollm2s_tokenizer(random_mode, target_dir):
    profile = PROFILES["gpu-llama8b"]
    kwargs = engine.engine_kwargs(profile, configs.for_profile(profile, "draft_model", 2), device="cuda")
    assert kwargs["model"] == str(shapes.shape_dir("llama-3.1-8b")) and kwargs["load_format"] == "dummy"
    assert kwargs["tokenizer"] == str(target_dir) and kwargs["max_model_len"] == 8192
    assert kwargs["speculative_config"]["model"] == str(shapes.shape_dir("llama-3.2-1b"))
    assert model_refs.tokenizer_path(PROFILES["gpu-llama8b"]) == str(target_dir)
    assert random_weights.label() == random_weights.LABEL  # from now on this process's results say so
    # speclab's own models keep their weights, random mode or not
    tiny = engine.engine_kwargs(get_profile("gpu-tiny"), None, device="cuda")
    assert "load_format" not in tiny and "tokenizer" not in tiny


def test_results_and_figures_of_random_weights_are_labelled(random_mode, tmp_path):
    import matplotlib.pyplot as plt

    path = report.save_results("x", {"speedup": 1.5}, tmp_path)
    assert "weights" not in json.loads(path.read_text())  # no engine loaded random weights yet
    random_weights.note_loaded()
    saved = json.loads(report.save_results("x", {"speedup": 1.5}, tmp_path).read_text())
    assert saved == {"weights": random_weights.LABEL, "speedup": 1.5}
    fig = plt.figure()
    report.save_figure(fig, "y", tmp_path)
    assert any("random weights" in t.get_text() for t in fig.texts)
    plt.close(fig)


def test_random_weights_are_refused_for_speclabs_own_models(random_mode):
    random_weights.check_profile(get_profile("gpu-llama8b"))
    for name in ("cpu-tiny", "gpu-tiny"):
        with pytest.raises(SpeclabError, match="random weights are for gpu-llama8b and gpu-qwen3-8b"):
            random_weights.check_profile(PROFILES[name])
