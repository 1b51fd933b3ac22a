"""Memory arithmetic checked against hand-computed numbers and published model sizes."""

import pytest

from speclab.algorithms import memory
from speclab.algorithms.memory import (GIB, Allowance, kv_bytes_per_token, parameter_count, parameter_counts, plan,
                                       weight_bytes)
from speclab.measure import plots
from speclab.models import model_config
from speclab.models.profiles import SpeclabError
from speclab.models.profiles import PROFILES

# sizes the publishers report (Hugging Face model pages / safetensors metadata)
PUBLISHED = {"llama-3.1-8b": 8.03e9, "llama-3.1-70b": 70.6e9, "llama-3.2-1b": 1.24e9, "smollm2-135m": 134.5e6}


@pytest.mark.parametrize("name,published", PUBLISHED.items())
def test_parameter_counts_within_one_percent_of_published(name, published):
    assert abs(parameter_count(name) - published) / published < 0.01


def test_parameter_counts_exact():
    # 8B: 2 x 128256 x 4096 (embedding + lm_head) + 32 x 218,112,000 per layer + 4096 final norm
    per_layer = (4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096) + 3 * 4096 * 14336 + 2 * 4096
    assert per_layer == 218_112_000
    assert parameter_count("llama-3.1-8b") == 2 * 128256 * 4096 + 32 * per_layer + 4096 == 8_030_261_248
    assert parameter_count("llama-3.2-1b") == 1_235_814_400  # tied: the embedding counts once
    assert parameter_count("smollm2-135m") == 134_515_008
    assert parameter_count("llama-3.1-70b") == 70_553_706_496


def test_tied_embeddings_count_once():
    cfg = model_config.load_config("llama-3.2-1b")
    untied = {**cfg, "tie_word_embeddings": False}
    assert parameter_count(untied) - parameter_count(cfg) == 128256 * 2048
    assert parameter_counts(cfg)["lm_head"] == 0


def test_head_dim_given_or_derived_and_gqa():
    base = {"num_hidden_layers": 2, "hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 16,
            "vocab_size": 1000}
    assert kv_bytes_per_token(base) == 2 * 2 * 16 * 64 * 2  # no kv heads: MHA; head_dim = 1024 / 16
    gqa = {**base, "num_key_value_heads": 8, "head_dim": 128}  # Qwen3-style: head_dim wider than hidden/heads
    assert kv_bytes_per_token(gqa) == 2 * 2 * 8 * 128 * 2
    # q projects 1024 -> 16 x 128, k and v 1024 -> 8 x 128, o back to 1024
    assert parameter_counts(gqa)["attention"] == 2 * (1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024)


def test_kv_bytes_per_token_by_hand():
    assert kv_bytes_per_token("llama-3.1-8b") == 2 * 32 * 8 * 128 * 2 == 131072
    assert kv_bytes_per_token("llama-3.2-1b") == 2 * 16 * 8 * 64 * 2 == 32768
    assert kv_bytes_per_token("smollm2-135m") == 2 * 30 * 3 * 64 * 2 == 23040
    assert kv_bytes_per_token("llama-3.1-70b") == 2 * 80 * 8 * 128 * 2 == 327680
    assert kv_bytes_per_token("llama-3.1-8b", "fp8") == 65536
    assert memory.kv_cache_bytes("llama-3.1-8b", context_len=8192, batch=4) == 131072 * 8192 * 4 == 4 * GIB


def test_weight_bytes_by_dtype():
    n = 8_030_261_248
    assert weight_bytes("llama-3.1-8b") == 2 * n  # torch_dtype bfloat16 from the config
    assert weight_bytes("llama-3.1-8b", "fp32") == 4 * n
    # fp8 quantizes linear layers only; embedding, lm_head and norms stay 16 bit
    linear = 32 * (41_943_040 + 176_160_768)
    assert weight_bytes("llama-3.1-8b", "fp8") == linear + 2 * (n - linear) == 9_081_200_640
    assert weight_bytes("llama-3.1-8b", "int4", embeddings_dtype="int4") == n / 2
    with pytest.raises(SpeclabError, match="unknown dtype"):
        weight_bytes("llama-3.1-8b", "int3")


def test_quantizing_the_1b_draft_saves_less_than_half():
    bf16, fp8 = weight_bytes("llama-3.2-1b", "bf16"), weight_bytes("llama-3.2-1b", "fp8")
    assert round(bf16 / 1e9, 2) == 2.47 and round(fp8 / 1e9, 2) == 1.50
    assert 0.35 < 1 - fp8 / bf16 < 0.45  # the 128k-token embedding (21% of the weights) is not quantized


def test_eagle_heads_count_only_what_they_add():
    # EAGLE-1: fc 2h->h, one layer without input norm; embedding and lm_head come from the target
    assert parameter_count("eagle-llama3.1-8b", "eagle") == 2 * 4096 * 4096 + 41_943_040 + 176_160_768 + 4096
    # EAGLE-3: fc 3h->h, q/k/v read 2h, 4 norms, own lm_head over 32000 draft tokens
    eagle3 = parameter_counts("eagle3-llama3.1-8b")  # role detected from draft_vocab_size/architecture
    assert eagle3["attention"] == 8192 * 4096 + 2 * 8192 * 1024 + 4096 * 4096
    assert eagle3["lm_head"] == 4096 * 32000 and eagle3["embeddings"] == 0
    assert eagle3["total"] == 424_689_664
    # plain Llama architecture name
    assert model_config.role_of(model_config.load_config("eagle-llama3.1-8b")) == "model"


def test_worked_24gib_example_8b_plus_1b_draft():
    p = plan("llama-3.1-8b", "llama-3.2-1b", gpu_gib=24, gpu_memory_utilization=0.9, context_len=8192,
             num_speculative_tokens=5)
    assert p.budget_bytes == pytest.approx(21.6 * GIB)
    assert p.target_bytes == 16_060_522_496 and p.draft_bytes == 2_471_628_800
    assert p.kv_bytes_per_token == 131072 + 32768
    # room = 21.6 - 2.5 GiB - weights = 1,976,317,542 B -> 753 blocks of 16 tokens x 160 KiB
    assert p.kv_room_bytes == pytest.approx(19.1 * GIB - 18_532_151_296)
    assert p.kv_blocks == 753 and p.kv_tokens == 12048
    assert p.max_concurrent == 1 and p.fits  # 8197 tokens need 513 blocks
    assert plan("llama-3.1-8b", "llama-3.2-1b", gpu_gib=24, context_len=4096,
                num_speculative_tokens=5).max_concurrent == 2
    assert "fits: yes" in p.explain() and "160 KiB" in p.explain()


def test_fit_decisions():
    # 70B in bf16 (131 GiB of weights) does not fit the 126.9 GiB budget of a 141 GiB GPU
    no = plan("llama-3.1-70b", "llama-3.1-8b", gpu_gib=141)
    assert not no.fits and no.kv_room_bytes < 0 and no.verdict.startswith("no: weights")
    # in fp8 (weights ~76 GiB with the 8B draft) it does, with room to spare
    assert plan("llama-3.1-70b", "llama-3.1-8b", gpu_gib=141, dtype="fp8").max_concurrent >= 10
    # weights fit on 24 GiB, but one 16k-token sequence does not: KV room is ~12k tokens
    long = plan("llama-3.1-8b", "llama-3.2-1b", gpu_gib=24, context_len=16384)
    assert long.kv_room_bytes > 0 and not long.fits and "one sequence needs 16384" in long.verdict
    # Llama-3.1's default max_model_len (131072) would not fit even without a draft
    assert not plan("llama-3.1-8b", gpu_gib=24, context_len=131072).fits
    # without the allowance or the draft there is more room
    assert (plan("llama-3.1-8b", gpu_gib=24, allowance=Allowance(0, 0, 0)).kv_tokens
            > plan("llama-3.1-8b", gpu_gib=24).kv_tokens)
    with pytest.raises(SpeclabError):
        plan("llama-3.1-8b", gpu_gib=24, gpu_memory_utilization=1.5)


def test_tensor_parallel_splits_weights_and_kv():
    one, two = plan("llama-3.1-70b", gpu_gib=80), plan("llama-3.1-70b", gpu_gib=80, tensor_parallel_size=2)
    assert two.target_bytes == one.target_bytes / 2 and two.kv_bytes_per_token == 327680 // 2
    assert not one.fits and two.fits


def test_gpu_table_and_text_tables():
    plans = memory.gpu_table("llama-3.1-8b", "llama-3.2-1b", gpu_sizes=(24, 80), num_speculative_tokens=5)
    assert [p.gpu_gib for p in plans] == [24, 80]
    rows = [p.row() for p in plans]
    assert rows[0]["KV tokens"] == "12,048" and rows[0]["fits"] == "yes"
    text = memory.text_table(rows).splitlines()
    assert all(col in text[0] for col in rows[0]) and text[2].split()[0] == "24"
    assert len(text) == 4 and len({len(line) for line in text}) == 1  # header, rule, 2 rows, aligned
    assert memory.html_table([{"a<b": "1&2"}], caption="c").startswith("<table><caption>c</caption>")
    assert "a&lt;b" in memory.html_table([{"a<b": "1&2"}]) and "1&amp;2" in memory.html_table([{"a<b": "1&2"}])


def test_plot_has_one_bar_per_gpu_per_part():
    plans = memory.gpu_table("llama-3.1-8b", "llama-3.2-1b", gpu_sizes=(24, 40, 80))
    fig = plots.memory_plans(plans)
    ax = fig.axes[0]
    assert len(ax.containers) == 5 and all(len(c) == 3 for c in ax.containers)
    # the stack of bar 0 reaches the GPU size
    assert sum(c[0].get_height() for c in ax.containers) == pytest.approx(24)


def test_provisioned_config_never_downloads(monkeypatch, tmp_path, target_dir):
    """Read from disk when the model is there, None when it is not: never a download or a conversion."""
    import huggingface_hub
    from huggingface_hub import constants

    from speclab.models import provision

    def refuse(*args, **kwargs):
        raise AssertionError("provisioned_config tried to fetch a model")

    for name in ("hf_hub_download", "snapshot_download"):
        monkeypatch.setattr(huggingface_hub, name, refuse)
    assert model_config.provisioned_config(PROFILES["gpu-synthetic"])["hidden_size"] == 4096  # a shape: always on disk
    cfg = model_config.provisioned_config(PROFILES["cpu-tiny"])  # provisioned by the session's fixture
    assert (cfg["hidden_size"], cfg["num_hidden_layers"]) == (576, 30)
    monkeypatch.setattr(provision, "fetch_smollm2", refuse)  # from here on, nothing is on disk
    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    assert model_config.provisioned_config(PROFILES["cpu-tiny"]) is None
    assert model_config.provisioned_config(PROFILES["gpu-llama8b"]) is None


def test_plan_knows_the_eagle_shapes_by_name():
    eagle = plan("llama-3.1-8b", "eagle-llama3.1-8b", gpu_gib=24)
    assert eagle.draft_bytes == 2 * 251_662_336  # the head alone: embedding and lm_head are the target's
    assert eagle.kv_bytes_per_token == 131072 + 2 * 1 * 8 * 128 * 2
    rows = memory.parameter_rows({"eagle": "eagle-llama3.1-8b", "8b": "llama-3.1-8b"})
    assert rows[0]["params"] == "0.252 B" and rows[1]["params"] == "8.030 B" and rows[1]["bf16 GB"] == "16.06"


def test_decode_parameters_and_cost_ratio_by_hand():
    # 8B: everything but its 128256 x 4096 embedding lookup (its untied lm_head counts)
    assert memory.decode_parameters("llama-3.1-8b") == 8_030_261_248 - 128256 * 4096
    # 1B: tied, so the embedding matrix is read once, as the lm_head: the whole model
    assert memory.decode_parameters("llama-3.2-1b") == 1_235_814_400
    # EAGLE head: its own 251.7 M plus the target's lm_head it borrows
    assert memory.decode_parameters("eagle-llama3.1-8b") == 251_662_336 + 128256 * 4096
    assert memory.cost_ratio("llama-3.2-1b", "llama-3.1-8b") == pytest.approx(1_235_814_400 / 7_504_924_672)
    assert 0.16 < memory.cost_ratio("llama-3.2-1b", "llama-3.1-8b") < 0.17
    assert (memory.cost_ratio("eagle3-llama3.1-8b", "llama-3.1-8b")
            < memory.cost_ratio("eagle-llama3.1-8b", "llama-3.1-8b"))
