"""Provisioning: idempotent, atomic, verified."""

import json
import time

import pytest

from speclab import models
from speclab.profiles import PROFILES, SpeclabError, get_profile


def test_atomic_folder_leaves_nothing_on_failure(tmp_path):
    final = tmp_path / "thing"
    with pytest.raises(RuntimeError):
        with models.atomic_folder(final) as scratch:
            (scratch / "half.bin").write_bytes(b"x")
            raise RuntimeError("interrupted")
    assert not final.exists() and list(tmp_path.iterdir()) == []
    with models.atomic_folder(final) as scratch:
        (scratch / "whole.bin").write_bytes(b"y")
    assert models.is_complete(final) and (final / "whole.bin").read_bytes() == b"y"


def test_incomplete_leftover_is_replaced(tmp_path):
    final = tmp_path / "m"
    final.mkdir()
    (final / "stale").write_text("from an interrupted run")
    assert not models.is_complete(final)
    with models.atomic_folder(final) as scratch:
        (scratch / "new").write_text("ok")
    assert not (final / "stale").exists() and models.is_complete(final)


def test_fetch_is_idempotent_and_verified(target_dir):
    started = time.perf_counter()
    assert models.fetch_smollm2() == target_dir
    assert time.perf_counter() - started < 1.0  # the second call only checks the marker
    config = json.loads((target_dir / "config.json").read_text())
    assert (config["model_type"], config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == ("llama", 30, 576, 49152)
    assert config["tie_word_embeddings"] is True
    assert json.loads((target_dir / "speclab-source.json").read_text())["sha256"] == models.SMOLLM2_GGUF_SHA256
    assert (target_dir / "model.safetensors").stat().st_size > 200e6


def test_converted_model_answers(target_dir):
    """The converted weights are the real model: transformers greedy continuation is sensible."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(target_dir)
    model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    text = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}], tokenize=False,
                                   add_generation_prompt=True)
    ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
    out = model.generate(ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids.shape[1]:])


def test_cache_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path / "c"))
    assert models.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()


def test_profiles():
    assert {"cpu-tiny", "gpu-llama8b", "gpu-qwen3-8b", "gpu-synthetic"} <= set(PROFILES)
    llama = get_profile("gpu-llama8b")
    assert llama.target == "meta-llama/Llama-3.1-8B-Instruct"
    assert llama.drafter("eagle") == "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
    assert llama.drafter("eagle3") == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert llama.drafter("draft_model") == "meta-llama/Llama-3.2-1B-Instruct"
    assert not get_profile("gpu-qwen3-8b").gated
    with pytest.raises(SpeclabError, match="choose one of"):
        get_profile("tpu-huge")


def test_gpu_profile_without_gpu_is_one_line(monkeypatch):
    from speclab.profiles import require_device

    monkeypatch.setenv("SPECLAB_DEVICE", "cpu")
    with pytest.raises(SpeclabError, match="needs an NVIDIA GPU and none was found: use --profile cpu-tiny"):
        require_device(get_profile("gpu-llama8b"))
