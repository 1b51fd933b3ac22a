"""The shape folders: published configs that transformers and vLLM both accept."""

import pytest

from speclab.models import shapes
from speclab.models.profiles import PROFILES, SpeclabError

LLAMA = {"llama-3.1-8b", "llama-3.1-70b", "llama-3.2-1b", "smollm2-135m", "eagle-llama3.1-8b", "eagle3-llama3.1-8b"}
EXPECTED = LLAMA | {"qwen3-8b", "qwen3-0.6b", "eagle3-qwen3-8b", "mimo-7b", "dflash-qwen3-8b"}


def test_every_shape_is_listed_and_registered():
    assert set(shapes.list_shapes()) == EXPECTED == set(shapes.SHAPES)


def test_shape_dir_accepts_profile_references():
    assert shapes.shape_dir("shape:llama-3.1-8b") == shapes.shape_dir("llama-3.1-8b")
    for profile in PROFILES.values():  # every shape: reference in a profile resolves
        for ref in [profile.target, *profile.drafters.values()]:
            if ref.startswith("shape:"):
                assert (shapes.shape_dir(ref) / "config.json").is_file()
    with pytest.raises(SpeclabError, match="unknown shape 'llama-9b'"):
        shapes.shape_dir("llama-9b")


@pytest.mark.parametrize("name", sorted(LLAMA))
def test_configs_are_complete_llama_configs(name):
    from transformers import AutoConfig

    cfg = shapes.shape_config(name)
    assert cfg["model_type"] == "llama" and cfg["rms_norm_eps"] == 1e-05
    hf = AutoConfig.from_pretrained(shapes.shape_dir(name))
    assert type(hf).__name__ == "LlamaConfig"
    assert hf.num_hidden_layers == cfg["num_hidden_layers"] and hf.head_dim in (64, 128)


def test_published_values():
    c8, c1, c70 = (shapes.shape_config(n) for n in ("llama-3.1-8b", "llama-3.2-1b", "llama-3.1-70b"))
    assert (c8["num_hidden_layers"], c8["hidden_size"], c8["intermediate_size"],
            c8["num_key_value_heads"]) == (32, 4096, 14336, 8)
    assert c8["rope_scaling"]["rope_type"] == "llama3" and c8["max_position_embeddings"] == 131072
    assert c8["tie_word_embeddings"] is False and c1["tie_word_embeddings"] is True and c1["head_dim"] == 64
    assert (c70["num_hidden_layers"], c70["hidden_size"], c70["num_attention_heads"]) == (80, 8192, 64)
    assert shapes.shape_config("eagle3-llama3.1-8b")["draft_vocab_size"] == 32000
    assert shapes.shape_role("eagle-llama3.1-8b") == "eagle" and shapes.shape_role("shape:llama-3.1-8b") == "model"


def test_qwen3_and_mimo_shapes():
    """Qwen3-8B with its 0.6B draft and EAGLE-3 head share a vocabulary; MiMo carries one MTP layer."""
    from transformers import AutoConfig

    from speclab.vllm_layer.validation import has_mtp_layers

    q8, q06, head = (shapes.shape_config(n) for n in ("qwen3-8b", "qwen3-0.6b", "eagle3-qwen3-8b"))
    assert (q8["num_hidden_layers"], q8["hidden_size"], q8["intermediate_size"],
            q8["num_key_value_heads"]) == (36, 4096, 12288, 8)
    assert q8["vocab_size"] == q06["vocab_size"] == head["vocab_size"] == 151936 and head["draft_vocab_size"] == 32000
    assert head["hidden_size"] == q8["hidden_size"] and shapes.shape_role("eagle3-qwen3-8b") == "eagle3"
    assert type(AutoConfig.from_pretrained(shapes.shape_dir("qwen3-0.6b"))).__name__ == "Qwen3Config"
    mimo = AutoConfig.from_pretrained(shapes.shape_dir("mimo-7b"),
                                      trust_remote_code=True)  # its config class ships beside it
    assert mimo.model_type == "mimo" and has_mtp_layers(shapes.shape_config("mimo-7b"))


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # local folders: no reason to ask the Hub (saves ~25 s per EAGLE config)


def _engine_config(target, speculative_config=None):
    vllm_args = pytest.importorskip("vllm.engine.arg_utils")
    return vllm_args.EngineArgs(model=str(shapes.shape_dir(target)), load_format="dummy", skip_tokenizer_init=True,
                                max_model_len=2048, enforce_eager=True,
                                speculative_config=speculative_config).create_engine_config()


@pytest.mark.parametrize("method,draft", [(None, None), ("draft_model", "llama-3.2-1b"),
                                          ("eagle", "eagle-llama3.1-8b"), ("eagle3", "eagle3-llama3.1-8b")])
def test_vllm_accepts_the_shapes_with_dummy_weights(offline, method, draft):
    spec = {"method": method, "model": str(shapes.shape_dir(draft)), "num_speculative_tokens": 3} if method else None
    cfg = _engine_config("llama-3.1-8b", spec)
    assert cfg.model_config.get_num_layers(cfg.parallel_config) == 32
    if method:
        assert cfg.speculative_config.method == method


def test_vllm_takes_draft_quantization_inside_the_speculative_config(offline):
    spec = {"method": "draft_model", "model": str(shapes.shape_dir("llama-3.2-1b")), "num_speculative_tokens": 5}
    assert _engine_config("llama-3.1-8b", {**spec, "quantization": "fp8"}).speculative_config.quantization == "fp8"
    with pytest.raises(Exception, match="Unknown quantization method: int8"):  # the seed's "int8" is no method name
        _engine_config("llama-3.1-8b", {**spec, "quantization": "int8"})
