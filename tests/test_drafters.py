"""Drafter folders in the layouts vLLM 0.32 loads, for the CPU profile's target."""

import json

import pytest
import torch
from safetensors import safe_open

from speclab import train
from speclab.models import drafter_layouts, drafter_packing, drafters, random_drafters
from speclab.models.profiles import PROFILES, SpeclabError
from speclab.vllm_layer import validation
from speclab.vllm_layer.engine import IN_PROCESS_ENV


def tensor_names(folder):
    with safe_open(str(folder / drafter_layouts.WEIGHTS), framework="pt") as f:
        return set(f.keys())


def test_every_cpu_profile_drafter_is_provided():
    refs = PROFILES["cpu-tiny"].drafters.values()
    names = {ref.split(":", 1)[1] for ref in refs}
    assert names == set(drafters.NAMES)
    for name in names:
        folder = drafters.provide(name)
        assert (folder / "config.json").is_file() and (folder / drafter_layouts.WEIGHTS).is_file()
        card = drafter_layouts.read_card(folder)
        assert card["method"] == drafters.NAMES[name]
        assert isinstance(card["trained"], bool)


def test_unknown_drafter_is_a_one_line_error():
    with pytest.raises(SpeclabError, match="choose one of"):
        drafters.provide("drafter-nonsense")


def test_eagle_heads_share_the_targets_embedding_and_lm_head():
    # vLLM shares embed_tokens / lm_head with the target when the checkpoint has none
    keys = tensor_names(drafters.provide("drafter-eagle"))
    assert "fc.weight" in keys and not any("embed_tokens" in k or "lm_head" in k for k in keys)
    keys = tensor_names(drafters.provide("drafter-eagle3"))
    assert not any("embed_tokens" in k for k in keys)


def test_eagle3_draft_vocabulary_maps_onto_the_targets_rows():
    """A head with its own draft vocabulary: lm_head row i is the target's row for token i + d2t[i]."""
    from safetensors.torch import load_file

    folder = drafters.provide("drafter-eagle3")
    cfg = json.loads((folder / "config.json").read_text())
    if cfg["draft_vocab_size"] == cfg["vocab_size"]:
        pytest.skip("this eagle3 head shares the target's full lm_head")
    tensors = load_file(str(folder / drafter_layouts.WEIGHTS))
    ids = torch.arange(cfg["draft_vocab_size"]) + tensors["d2t"]
    assert tensors["lm_head.weight"].shape == (cfg["draft_vocab_size"], cfg["hidden_size"])
    assert bool((ids[1:] > ids[:-1]).all()) and 0 <= int(ids[0]) and int(ids[-1]) < cfg["vocab_size"]
    embed = drafter_layouts.target_weights("model.embed_tokens.weight")["model.embed_tokens.weight"]
    assert torch.equal(tensors["lm_head.weight"], embed[ids])  # the target's (tied) rows, frozen in training


# What the shipped drafters must at least reach on the held-out prompts (measured 1.84, 2.04, 2.21, 1.46;
# random heads give 1.00-1.07; issue 5's targets where they are met): a retrained drafter that falls below
# them should not ship.
SHIPPED_FLOOR = {"draft_model": 1.8, "eagle": 2.0, "eagle3": 2.2, "medusa": 1.4}


def vllm_tensor_names(method, cfg):
    """The tensors vLLM 0.32 reads for each method (Hugging Face names), for a shipped drafter's config."""
    def layer(prefix, input_norm=True):
        names = {f"{prefix}.self_attn.{p}_proj.weight" for p in "qkvo"} | {
            f"{prefix}.mlp.{p}_proj.weight" for p in ("gate", "up", "down")} | {
            f"{prefix}.post_attention_layernorm.weight"}
        return names | ({f"{prefix}.input_layernorm.weight"} if input_norm else set())

    if method == "draft_model":
        return set().union(*(layer(f"model.layers.{i}") for i in range(cfg["num_hidden_layers"]))) | {
            "model.norm.weight", "model.embed_tokens.weight"}
    if method == "eagle":
        return layer("layers.0", input_norm=False) | {"fc.weight"}
    if method == "eagle3":
        own_head = {"lm_head.weight", "d2t"} if cfg["draft_vocab_size"] < cfg["vocab_size"] else set()
        return layer("midlayer") | {"midlayer.hidden_norm.weight", "norm.weight", "fc.weight"} | own_head
    return {f"blocks.{i}.layers.{j}.weight" for i in range(cfg["num_heads"]) for j in range(cfg["num_hidden_layers"])
            } | {"lm_heads.0.weight"}


@pytest.mark.parametrize("method", train.TRAIN_METHODS)
def test_shipped_drafters_are_trained_packed_and_measured(method):
    from safetensors.torch import load_file

    folder = drafters.shipped(method)
    assert folder is not None, f"no trained {method} in data/drafters/{method}/"
    stored = drafter_layouts.WEIGHTS if method in drafter_packing.KEEP_BF16 else drafter_packing.PACKED
    assert sorted(f.name for f in folder.iterdir()) == ["card.json", "config.json", stored]
    packed = folder / stored
    assert packed.stat().st_size < 10e6
    tensors = load_file(str(packed))
    for name, t in tensors.items():  # int8 matrices with a float32 scale per row; norms bf16; d2t int64
        if name.endswith(".scale"):
            assert t.dtype == torch.float32 and tensors[name.removesuffix(".scale")].shape[0] == t.shape[0]
        elif t.dim() == 2 and method not in drafter_packing.KEEP_BF16:
            assert t.dtype == torch.int8 and f"{name}.scale" in tensors
        else:
            assert t.dtype in (torch.bfloat16, torch.int64), (name, t.dtype)
    assert not {"model.embed_tokens.weight", "lm_head.weight", "lm_heads.0.weight"} & set(tensors)  # the target's
    card = drafter_layouts.read_card(folder)
    assert card["trained"] is True and card["method"] == method
    assert ("bf16 as trained" if method in drafter_packing.KEEP_BF16 else "int8") in card["storage"]
    measured = card["acceptance"]
    assert (measured["k"] == 3 and measured["prompt_set"] == "data/prompts/heldout.jsonl"
            and measured["temperature"] == 0)
    assert measured["outputs_identical"] is True
    assert len(measured["per_position_rates"]) == 3 and measured["acceptance_length"] > SHIPPED_FLOOR[method]
    # what vLLM gets: a bf16 model.safetensors with every tensor it reads
    vllm_folder = drafters.loadable(method, folder)
    cfg = json.loads((vllm_folder / "config.json").read_text())
    weights = load_file(str(vllm_folder / drafter_layouts.WEIGHTS))
    assert set(weights) == vllm_tensor_names(method, cfg)
    assert {t.dtype for t in weights.values() if t.is_floating_point()} == {torch.bfloat16}


def random_eagle3_folder(folder, seed=0):
    """A small bf16 EAGLE-3-like folder: matrices with rows of very different sizes (one all zero),
    a norm, and a draft vocabulary whose lm_head is the target's rows."""
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(48, 40, generator=gen) * torch.logspace(-4, 0, 48)[:, None]
    w[7] = 0
    ids = torch.sort(torch.randperm(49152, generator=gen)[:16]).values
    embed = drafter_layouts.target_weights(drafter_layouts.EMBED)[drafter_layouts.EMBED]
    tensors = {"fc.weight": w.to(torch.bfloat16), "norm.weight": torch.rand(40, generator=gen).to(torch.bfloat16),
               "d2t": ids - torch.arange(16), "lm_head.weight": embed[ids]}
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / drafter_layouts.WEIGHTS))
    (folder / "config.json").write_text(json.dumps({"draft_vocab_size": 16}))
    (folder / "card.json").write_text(json.dumps({"method": "eagle3", "trained": True}))
    return tensors


def test_pack_then_loadable_gives_the_weights_back_within_int8_rounding(tmp_path):
    from safetensors.torch import load_file

    original = random_eagle3_folder(tmp_path / "bf16")
    drafter_packing.pack(tmp_path / "bf16", tmp_path / "packed")
    packed = load_file(str(tmp_path / "packed" / drafter_packing.PACKED))
    assert set(packed) == {"fc.weight", "fc.weight.scale", "norm.weight", "d2t"}  # lm_head: the target's rows
    assert "d2t" in drafter_layouts.read_card(tmp_path / "packed")["storage"]
    back = load_file(str(drafters.loadable("eagle3", tmp_path / "packed") / drafter_layouts.WEIGHTS))
    assert set(back) == set(original)
    w, deq = original["fc.weight"].float(), back["fc.weight"].float()
    rowmax = w.abs().amax(dim=1, keepdim=True)
    # half an int8 step of the row, plus rounding the result to bf16 (8 significant bits)
    assert bool(((w - deq).abs() <= rowmax / 254 * (1 + 1e-4) + deq.abs() * 2 ** -8).all())
    assert bool((deq[7] == 0).all()) and back["fc.weight"].dtype == torch.bfloat16
    for name in ("norm.weight", "d2t", "lm_head.weight"):  # kept as trained, or rebuilt bit for bit
        assert torch.equal(back[name], original[name]), name


def test_an_assembled_folder_is_rebuilt_when_its_source_changes(tmp_path):
    from safetensors.torch import load_file

    random_eagle3_folder(tmp_path / "a", seed=0)
    b = random_eagle3_folder(tmp_path / "b", seed=1)
    drafter_packing.pack(tmp_path / "a", tmp_path / "packed")
    first = drafters.loadable("eagle3", tmp_path / "packed")
    assert drafters.loadable("eagle3", tmp_path / "packed") == first  # reused while nothing changed
    drafter_packing.pack(tmp_path / "b", tmp_path / "packed")  # the same card and file size, other weights
    again = drafters.loadable("eagle3", tmp_path / "packed")
    assert torch.equal(load_file(str(again / drafter_layouts.WEIGHTS))["d2t"], b["d2t"])


@pytest.mark.parametrize("method", train.TRAIN_METHODS)
def test_train_recipe_repeats_the_shipped_run(method):
    # `python -m speclab.train --method m` must make what ships: the card and train.recipe() agree
    folder = drafters.shipped(method)
    whole, recipe = drafter_layouts.read_card(folder), train.recipe(method)
    card = whole["training"]
    assert card["schedule_steps"] == recipe.steps
    assert card["steps"] == (recipe.stop_after or recipe.steps)
    assert (card["batch_size"], card["lr"], card["draft_vocab"]) == (recipe.batch_size, recipe.lr, recipe.draft_vocab)
    assert card.get("hand_written_repeats", 1) == recipe.hand_written_repeats
    assert whole["data"]["sequences"] == (recipe.num_sequences or len(train.load_data(recipe.data)))
    if method == "medusa":
        assert json.loads((folder / "config.json").read_text())["num_hidden_layers"] == recipe.medusa_layers


def test_eagle3_reads_the_aux_layers_from_its_config():
    cfg = json.loads((drafters.provide("drafter-eagle3") / "config.json").read_text())
    assert cfg["eagle_aux_hidden_state_layer_ids"] == drafter_layouts.eagle3_aux_layers() == [2, 15, 27]
    with safe_open(str(drafters.provide("drafter-eagle3") / drafter_layouts.WEIGHTS), framework="pt") as f:
        assert list(f.get_slice("fc.weight").get_shape()) == [576, 3 * 576]


def test_medusa_carries_one_full_lm_head_for_all_heads():
    folder = drafters.provide("drafter-medusa")
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["original_lm_head"] and cfg["truncated_vocab_size"] == cfg["vocab_size"] == 49152
    keys = tensor_names(folder)
    assert "lm_heads.0.weight" in keys and "token_map" not in keys
    assert {f"blocks.{i}.layers.0.weight" for i in range(cfg["num_heads"])} <= keys


def test_shipped_heads_without_the_target_matrix_get_it_back(tmp_path):
    from safetensors.torch import load_file, save_file

    src = drafters.provide("drafter-medusa")
    small = tmp_path / "medusa"
    small.mkdir()
    tensors = {k: v for k, v in load_file(str(src / drafter_layouts.WEIGHTS)).items() if not k.startswith("lm_heads")}
    save_file(tensors, str(small / drafter_layouts.WEIGHTS))
    (small / "config.json").write_text((src / "config.json").read_text())
    (small / "card.json").write_text(json.dumps({"method": "medusa", "trained": True}))
    folder = drafters.loadable("medusa", small)
    assert folder != small and "lm_heads.0.weight" in tensor_names(folder)
    assert drafter_layouts.read_card(folder) == {"method": "medusa", "trained": True}


def test_tiny_mtp_is_a_target_with_mtp_layers_and_random_weights():
    folder = drafters.provide("tiny-mtp")
    cfg = json.loads((folder / "config.json").read_text())
    assert validation.has_mtp_layers(cfg) and cfg["model_type"] == "deepseek_v3"
    assert cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"] == 576  # an MLA head size the CPU backend runs
    assert drafter_layouts.read_card(folder)["trained"] is False
    assert (folder / "tokenizer.json").is_file()
    n = cfg["num_hidden_layers"]
    assert f"model.layers.{n}.eh_proj.weight" in tensor_names(folder)


def test_random_drafters_are_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    random_drafters.build_random_eagle(a)
    random_drafters.build_random_eagle(b)
    assert (a / drafter_layouts.WEIGHTS).read_bytes() == (b / drafter_layouts.WEIGHTS).read_bytes()


@pytest.mark.engine
def test_every_shipped_drafter_in_vllm_reaches_its_cards_quick_check(target_dir, monkeypatch):
    """Each shipped drafter measured as its card's quick check was (vLLM, the first 8 held-out prompts, k=3,
    32 tokens, greedy, eager engines): the same acceptance length within 0.15, greedy outputs equal up to
    near-ties. The card's full figure (24 prompts, 64 tokens) takes `python -m speclab.train --evaluate`
    about 13 minutes on two cores; this takes a quarter of that. Engines run inside this process."""
    from speclab.train.evaluate import QUICK_CHECK

    monkeypatch.setenv(IN_PROCESS_ENV, "1")
    folders = {method: drafters.SHIPPED_DIR / method for method in SHIPPED_FLOOR}
    measured = train.evaluate(folders, write_card=False, **QUICK_CHECK)
    for method, got in measured.items():
        card = drafter_layouts.read_card(folders[method])
        check = card["quick_check"]
        assert (check["num_prompts"], check["output_len"], check["k"]) == (got["num_prompts"], 32, 3)
        assert check["prompt_set"] == card["acceptance"]["prompt_set"]
        # 0.15: on 256 tokens one near-tie that parts a text moves the figure more than on the card's 1,536
        assert got["acceptance_length"] == pytest.approx(check["acceptance_length"], abs=0.15), method
        assert got["greedy_ok"], method
