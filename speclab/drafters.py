"""Drafters for the CPU profile's target (SmolLM2-135M-Instruct), in the layouts vLLM 0.32 loads.

``provide(name)`` answers a profile's ``local:<name>`` drafter reference with a folder:

- the trained drafter shipped in ``data/drafters/<method>/`` when there is one (its
  ``card.json`` says how it was trained and what acceptance vLLM measured with it);
- otherwise a randomly initialised drafter of the same shape, built once into the cache
  (deterministic seed, labelled ``"trained": false`` in its card). It loads and runs, so a
  lesson works end to end, but its acceptance is near zero: an untrained drafter is pure cost.

Each method wants its own layout (read from vLLM's model files):

- ``draft_model``: a complete Llama model with the target's tokenizer and vocabulary. vLLM does
  not share the target's embedding with a draft model, so the shipped folder holds only the
  trained layers and ``provide`` adds the target's (frozen) embedding when it assembles the
  folder in the cache; that keeps the shipped weights small.
- ``eagle``: one Llama decoder layer without its input norm plus ``fc`` (2h -> h). Without
  ``embed_tokens`` and ``lm_head`` in the checkpoint vLLM shares the target's.
- ``eagle3``: ``midlayer.*`` (attention over [embedding; hidden], 2h wide), ``fc`` fusing three
  of the target's hidden states (3h -> h), ``norm``; the embedding is the target's. The lm_head
  is either the target's (``draft_vocab_size`` = the target's vocabulary, nothing in the
  checkpoint) or its own over a draft vocabulary: ``lm_head.weight`` [N, h] and ``d2t`` (draft
  id i stands for target id i + d2t[i]), as the published Llama heads do with 32k of 128k tokens.
  Which target layers feed it is stored in its config (``eagle_aux_hidden_state_layer_ids``):
  vLLM reads it from there, so callers pass nothing extra.
- ``medusa``: residual blocks per head and one lm_head (``original_lm_head``). vLLM gives Medusa
  no access to the target's lm_head, so the folder carries a copy; the shipped folder holds only
  the blocks and ``provide`` adds the target's matrix, as for the draft model.
- ``mtp`` (``tiny-mtp``): not a drafter but a whole tiny DeepSeek-V3-style target with one
  MTP layer (SmolLM2's tokenizer, random weights): SmolLM2 has no MTP layers to draft with.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .models import REPO_ROOT, atomic_folder, cache_dir, fetch_smollm2, is_complete
from .profiles import SpeclabError

SHIPPED_DIR = REPO_ROOT / "data" / "drafters"
SEED = 1234
# profile reference name -> method
NAMES = {
    "drafter-draft_model": "draft_model",
    "drafter-eagle": "eagle",
    "drafter-eagle3": "eagle3",
    "drafter-medusa": "medusa",
    "tiny-mtp": "mtp",
}
# Target layers whose outputs feed EAGLE-3: low, middle, high of SmolLM2's 30 layers
# (vLLM's own default for a Llama of 30 layers, stated so that training and serving agree).
EAGLE3_AUX_LAYERS = (2, 15, 27)
DRAFT_MODEL_LAYERS = 2
MEDUSA_HEADS = 3
WEIGHTS = "model.safetensors"
# Bump when a builder's layout changes: cached drafters from an older builder are then rebuilt.
BUILDER_VERSION = 2
CARD = "card.json"


def method_of(name: str) -> str:
    try:
        return NAMES[name]
    except KeyError:
        raise SpeclabError(f"unknown drafter {name!r}: choose one of {', '.join(NAMES)}") from None


def eagle3_aux_layers() -> list[int]:
    """The target layers the EAGLE-3 drafter reads (also written into its config.json)."""
    return list(EAGLE3_AUX_LAYERS)


def shipped(method: str) -> Path | None:
    """The trained drafter folder in ``data/drafters/<method>/``, if one is shipped."""
    folder = SHIPPED_DIR / method
    if all((folder / f).is_file() for f in ("config.json", WEIGHTS, CARD)):
        return folder
    return None


def read_card(folder: str | Path) -> dict:
    path = Path(folder) / CARD
    return json.loads(path.read_text()) if path.is_file() else {}


def provide(name: str, force: bool = False) -> Path:
    """A folder vLLM loads for drafter ``name``: the shipped trained one, else a random one."""
    method = method_of(name)
    trained = shipped(method) if method != "mtp" else None
    if trained is not None:
        return loadable(method, trained, force=force)
    final = cache_dir() / "drafters" / name
    if is_complete(final) and not force and read_card(final).get("builder_version") == BUILDER_VERSION:
        return final
    with atomic_folder(final) as out:
        BUILDERS[method](out)
    return final


def loadable(method: str, folder: str | Path, force: bool = False) -> Path:
    """A folder vLLM loads for a drafter saved by :mod:`speclab.train`.

    EAGLE heads load as saved. A draft model and Medusa heads are saved without the target's
    embedding / lm_head (vLLM gives them no access to the target's, and it would triple the
    file): here they get it back, in a cache folder keyed by the source folder.
    """
    folder = Path(folder)
    if method not in NEEDS_TARGET_MATRIX or _has_matrix(method, folder):
        return folder
    import hashlib

    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    final = cache_dir() / "drafters" / f"{method}-{key}"
    if force or not (is_complete(final) and _same_card(final, folder)):
        with atomic_folder(final) as out:
            assemble(method, folder, out)
    return final


NEEDS_TARGET_MATRIX = {"draft_model": "model.embed_tokens.weight", "medusa": "lm_heads.0.weight"}


def _has_matrix(method: str, folder: Path) -> bool:
    from safetensors import safe_open

    with safe_open(str(folder / WEIGHTS), framework="pt") as f:
        return NEEDS_TARGET_MATRIX[method] in f.keys()


def _same_card(folder: Path, source: Path) -> bool:
    return read_card(folder) == read_card(source)


# ---------------------------------------------------------------- helpers shared with train.py

def target_config() -> dict:
    return json.loads((fetch_smollm2(quiet=True) / "config.json").read_text())


def target_weights(*names: str) -> dict:
    """Tensors from the target's safetensors (e.g. its embedding, shared by several drafters)."""
    from safetensors import safe_open

    out = {}
    with safe_open(str(fetch_smollm2(quiet=True) / WEIGHTS), framework="pt") as f:
        for name in names:
            out[name] = f.get_tensor(name)
    return out


def llama_config(num_layers: int, **extra) -> dict:
    """A Llama config of the target's width with ``num_layers`` layers (the drafter's own)."""
    base = target_config()
    keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "rms_norm_eps", "rope_theta", "rope_scaling", "max_position_embeddings", "vocab_size",
            "bos_token_id", "eos_token_id", "pad_token_id", "hidden_act", "attention_bias", "mlp_bias",
            "rope_parameters")
    cfg = {k: base[k] for k in keep if k in base}
    cfg.update(architectures=["LlamaForCausalLM"], model_type="llama", num_hidden_layers=num_layers,
               torch_dtype="bfloat16", tie_word_embeddings=False)
    cfg.update(extra)
    return cfg


def write_folder(out: Path, config: dict, tensors: dict, card: dict) -> None:
    """config.json + model.safetensors (contiguous tensors) + card.json."""
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / WEIGHTS), metadata={"format": "pt"})
    (out / CARD).write_text(json.dumps(card, indent=2) + "\n")


def copy_tokenizer(out: Path) -> None:
    """The target's tokenizer files, so that the folder also loads on its own."""
    src = fetch_smollm2(quiet=True)
    for f in src.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "vocab", "merges", "chat_template", "generation_config")):
            shutil.copy2(f, Path(out) / f.name)


def random_card(method: str, note: str = "") -> dict:
    return {"method": method, "trained": False, "weights": f"random (seed {SEED})", "builder_version": BUILDER_VERSION,
            "target": "SmolLM2-135M-Instruct",
            "note": note or "randomly initialised: loads and runs, but proposes tokens the target rarely accepts"}


def _randn(gen, *shape, std: float = 0.02):
    import torch

    return (torch.randn(*shape, generator=gen) * std).to(torch.bfloat16)


def _ones(n: int):
    import torch

    return torch.ones(n, dtype=torch.bfloat16)


def _layer(gen, prefix: str, h: int, inter: int, q: int, kv: int, qkv_in: int | None = None,
           input_norm: bool = True) -> dict:
    """Random tensors of one Llama decoder layer in Hugging Face names."""
    qkv_in = qkv_in or h
    t = {f"{prefix}.self_attn.q_proj.weight": _randn(gen, q, qkv_in),
         f"{prefix}.self_attn.k_proj.weight": _randn(gen, kv, qkv_in),
         f"{prefix}.self_attn.v_proj.weight": _randn(gen, kv, qkv_in),
         f"{prefix}.self_attn.o_proj.weight": _randn(gen, h, q),
         f"{prefix}.mlp.gate_proj.weight": _randn(gen, inter, h),
         f"{prefix}.mlp.up_proj.weight": _randn(gen, inter, h),
         f"{prefix}.mlp.down_proj.weight": _randn(gen, h, inter),
         f"{prefix}.post_attention_layernorm.weight": _ones(h)}
    if input_norm:
        t[f"{prefix}.input_layernorm.weight"] = _ones(h)
    return t


def _dims(cfg: dict) -> tuple[int, int, int, int]:
    h = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    return h, cfg["intermediate_size"], cfg["num_attention_heads"] * head_dim, cfg["num_key_value_heads"] * head_dim


def _generator():
    import torch

    return torch.Generator().manual_seed(SEED)


# ---------------------------------------------------------------- random drafters, one per method

def build_random_draft_model(out: Path) -> None:
    cfg = llama_config(DRAFT_MODEL_LAYERS, tie_word_embeddings=True)
    gen, (h, inter, q, kv) = _generator(), _dims(cfg)
    tensors = {}
    for i in range(DRAFT_MODEL_LAYERS):
        tensors.update(_layer(gen, f"model.layers.{i}", h, inter, q, kv))
    tensors["model.norm.weight"] = _ones(h)
    tensors["model.embed_tokens.weight"] = target_weights("model.embed_tokens.weight")["model.embed_tokens.weight"]
    write_folder(out, cfg, tensors, random_card("draft_model", "random layers with the target's embedding: "
                                                "loads and runs, proposes tokens the target rarely accepts"))
    copy_tokenizer(out)


def build_random_eagle(out: Path) -> None:
    cfg = llama_config(1)
    gen, (h, inter, q, kv) = _generator(), _dims(cfg)
    tensors = _layer(gen, "layers.0", h, inter, q, kv, input_norm=False)
    tensors["fc.weight"] = _randn(gen, h, 2 * h)
    write_folder(out, cfg, tensors, random_card("eagle"))


def eagle3_config(draft_vocab_size: int | None = None) -> dict:
    """Without ``draft_vocab_size`` the head shares the target's lm_head (full vocabulary)."""
    return llama_config(1, draft_vocab_size=draft_vocab_size or target_config()["vocab_size"],
                        eagle_aux_hidden_state_layer_ids=eagle3_aux_layers(),
                        target_hidden_size=target_config()["hidden_size"])


def build_random_eagle3(out: Path) -> None:
    cfg = eagle3_config()
    gen, (h, inter, q, kv) = _generator(), _dims(cfg)
    tensors = _layer(gen, "midlayer", h, inter, q, kv, qkv_in=2 * h)
    tensors["midlayer.hidden_norm.weight"] = _ones(h)
    tensors["norm.weight"] = _ones(h)
    tensors["fc.weight"] = _randn(gen, h, len(EAGLE3_AUX_LAYERS) * h)
    write_folder(out, cfg, tensors, random_card("eagle3"))


def medusa_config(num_heads: int = MEDUSA_HEADS, num_layers: int = 1) -> dict:
    """Medusa heads over the target's full lm_head: vLLM 0.32's truncated-vocabulary path
    (``token_map``) fails to load ("weights were not initialized from checkpoint: {'token_map'}")."""
    t = target_config()
    return {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": t["hidden_size"],
            "vocab_size": t["vocab_size"], "num_heads": num_heads, "num_hidden_layers": num_layers,
            "truncated_vocab_size": t["vocab_size"], "original_lm_head": True, "torch_dtype": "bfloat16"}


def build_random_medusa(out: Path) -> None:
    cfg = medusa_config()
    gen, h = _generator(), cfg["hidden_size"]
    tensors = {f"blocks.{i}.layers.{j}.weight": _randn(gen, h, h)
               for i in range(cfg["num_heads"]) for j in range(cfg["num_hidden_layers"])}
    tensors["lm_heads.0.weight"] = target_weights("model.embed_tokens.weight")["model.embed_tokens.weight"]
    write_folder(out, cfg, tensors, random_card("medusa", "random residual blocks over the target's lm_head: "
                                                "loads and runs, proposes tokens the target rarely accepts"))


# A tiny DeepSeek-V3-style model: dense MLA layers (no MoE), one MTP layer. The CPU attention
# backend needs a supported head size: MLA's kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576.
TINY_MTP = {
    "hidden_size": 256, "num_hidden_layers": 2, "num_nextn_predict_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 4, "intermediate_size": 512, "moe_intermediate_size": 128,
    "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 8,
    "q_lora_rank": None, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 64,
    "v_head_dim": 64, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "topk_method": "noaux_tc", "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0,
    "norm_topk_prob": True, "scoring_func": "sigmoid", "hidden_act": "silu", "tie_word_embeddings": False,
}


def tiny_mtp_config() -> dict:
    t = target_config()
    cfg = dict(TINY_MTP, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
               vocab_size=t["vocab_size"], bos_token_id=t.get("bos_token_id"), eos_token_id=t.get("eos_token_id"),
               pad_token_id=t.get("pad_token_id"), torch_dtype="bfloat16", rope_scaling=None)
    return cfg


def build_tiny_mtp(out: Path) -> None:
    """Random weights for a DeepSeek-V3-style target whose last layer is an MTP module."""
    cfg = tiny_mtp_config()
    gen, h, n = _generator(), cfg["hidden_size"], cfg["num_hidden_layers"]
    heads, rope, nope, vdim, rank = (cfg["num_attention_heads"], cfg["qk_rope_head_dim"], cfg["qk_nope_head_dim"],
                                     cfg["v_head_dim"], cfg["kv_lora_rank"])
    vocab, inter = cfg["vocab_size"], cfg["intermediate_size"]
    tensors = {"model.embed_tokens.weight": _randn(gen, vocab, h), "model.norm.weight": _ones(h),
               "lm_head.weight": _randn(gen, vocab, h)}
    for i in range(n + cfg["num_nextn_predict_layers"]):
        p = f"model.layers.{i}"
        tensors.update({
            f"{p}.input_layernorm.weight": _ones(h), f"{p}.post_attention_layernorm.weight": _ones(h),
            f"{p}.self_attn.q_proj.weight": _randn(gen, heads * (nope + rope), h),
            f"{p}.self_attn.kv_a_proj_with_mqa.weight": _randn(gen, rank + rope, h),
            f"{p}.self_attn.kv_a_layernorm.weight": _ones(rank),
            f"{p}.self_attn.kv_b_proj.weight": _randn(gen, heads * (nope + vdim), rank),
            f"{p}.self_attn.o_proj.weight": _randn(gen, h, heads * vdim),
            f"{p}.mlp.gate_proj.weight": _randn(gen, inter, h), f"{p}.mlp.up_proj.weight": _randn(gen, inter, h),
            f"{p}.mlp.down_proj.weight": _randn(gen, h, inter),
        })
        if i >= n:  # the MTP module: norms of embedding and hidden state, their projection, a head
            tensors.update({f"{p}.enorm.weight": _ones(h), f"{p}.hnorm.weight": _ones(h),
                            f"{p}.eh_proj.weight": _randn(gen, h, 2 * h),
                            f"{p}.shared_head.norm.weight": _ones(h),
                            f"{p}.shared_head.head.weight": tensors["lm_head.weight"].clone(),
                            f"{p}.embed_tokens.weight": tensors["model.embed_tokens.weight"].clone()})
    card = random_card("mtp", "a whole tiny DeepSeek-V3-style target with one MTP layer and random weights "
                              "(SmolLM2's tokenizer): shows the MTP mechanics; its text and acceptance mean nothing")
    write_folder(out, cfg, tensors, card)
    copy_tokenizer(out)


def assemble(method: str, source: Path, out: Path) -> None:
    """Saved drafter weights + the target's embedding matrix (SmolLM2 ties it to its lm_head)."""
    from safetensors.torch import load_file

    tensors = load_file(str(Path(source) / WEIGHTS))
    embed = target_weights("model.embed_tokens.weight")["model.embed_tokens.weight"]
    tensors[NEEDS_TARGET_MATRIX[method]] = embed
    config = json.loads((Path(source) / "config.json").read_text())
    if method == "draft_model":
        config["tie_word_embeddings"] = True
    write_folder(out, config, tensors, read_card(source))
    copy_tokenizer(out)


BUILDERS = {"draft_model": build_random_draft_model, "eagle": build_random_eagle, "eagle3": build_random_eagle3,
            "medusa": build_random_medusa, "mtp": build_tiny_mtp}
