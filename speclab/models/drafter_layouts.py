"""What vLLM 0.32's drafter folders look like, and the parts of the target they reuse.

The CPU profile's target is SmolLM2-135M-Instruct. Each method wants its own layout (read from
vLLM's model files):

- ``draft_model``: a complete Llama model with the target's tokenizer and vocabulary. vLLM does
  not share the target's embedding with a draft model, so the folder it loads carries a copy.
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
  no access to the target's lm_head, so the folder carries a copy.
- ``mtp`` (``tiny-mtp``): not a drafter but a whole tiny DeepSeek-V3-style target with one
  MTP layer (SmolLM2's tokenizer, random weights): SmolLM2 has no MTP layers to draft with.

Here: the configs of each layout, a Llama decoder layer's tensor names and shapes, a folder
written (config, weights, ``card.json``, tokenizer), and what a drafter takes from the target
(``target_matrix``). The random builders (:mod:`speclab.models.random_drafters`), the compact storage
(:mod:`speclab.models.drafter_packing`), :mod:`speclab.models.drafters` and :mod:`speclab.train` build on it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .provision import fetch_smollm2

SEED = 1234
# Target layers whose outputs feed EAGLE-3: low, middle, high of SmolLM2's 30 layers
# (vLLM's own default for a Llama of 30 layers, stated so that training and serving agree).
EAGLE3_AUX_LAYERS = (2, 15, 27)
DRAFT_MODEL_LAYERS = 2
MEDUSA_HEADS = 3
WEIGHTS = "model.safetensors"  # what vLLM loads (bf16)
# Bump when a builder's layout changes: cached drafters from an older builder are then rebuilt.
BUILDER_VERSION = 3
CARD = "card.json"
EMBED = "model.embed_tokens.weight"


def eagle3_aux_layers() -> list[int]:
    """The target layers the EAGLE-3 drafter reads (also written into its config.json)."""
    return list(EAGLE3_AUX_LAYERS)


def is_speculators_folder(folder: str | Path) -> bool:
    """A drafter saved by speculators, vLLM's drafter library (its config.json carries ``speculators_config``):
    vLLM loads it as saved."""
    path = Path(folder) / "config.json"
    return path.is_file() and "speculators_config" in json.loads(path.read_text())


def read_card(folder: str | Path) -> dict:
    path = Path(folder) / CARD
    return json.loads(path.read_text()) if path.is_file() else {}


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


# The tensors of one Llama decoder layer, in Hugging Face's (and vLLM's) names and in the order they are
# made: the random builders (speclab.models.random_drafters) and the trained layers of speclab.train both follow it.
LAYER_TENSORS = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                 "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                 "post_attention_layernorm.weight", "input_layernorm.weight")


def layer_dims(cfg: dict) -> tuple[int, int, int, int]:
    """Hidden size, MLP width, and the widths of all query heads and of all key/value heads."""
    h = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    return h, cfg["intermediate_size"], cfg["num_attention_heads"] * head_dim, cfg["num_key_value_heads"] * head_dim


def layer_shapes(cfg: dict, qkv_in: int | None = None, input_norm: bool = True) -> dict[str, tuple[int, ...]]:
    """The shape of each tensor of one decoder layer (``LAYER_TENSORS`` order); ``qkv_in``: the width
    the attention reads when it is not the hidden size (EAGLE-3 reads [embedding; feature])."""
    h, inter, q, kv = layer_dims(cfg)
    qkv_in = qkv_in or h
    shapes = {"self_attn.q_proj.weight": (q, qkv_in), "self_attn.k_proj.weight": (kv, qkv_in),
              "self_attn.v_proj.weight": (kv, qkv_in), "self_attn.o_proj.weight": (h, q),
              "mlp.gate_proj.weight": (inter, h), "mlp.up_proj.weight": (inter, h), "mlp.down_proj.weight": (h, inter),
              "post_attention_layernorm.weight": (h,), "input_layernorm.weight": (h,)}
    return {n: shapes[n] for n in LAYER_TENSORS if input_norm or n != "input_layernorm.weight"}


def eagle3_config(draft_vocab_size: int | None = None) -> dict:
    """Without ``draft_vocab_size`` the head shares the target's lm_head (full vocabulary)."""
    return llama_config(1, draft_vocab_size=draft_vocab_size or target_config()["vocab_size"],
                        eagle_aux_hidden_state_layer_ids=eagle3_aux_layers(),
                        target_hidden_size=target_config()["hidden_size"])


def medusa_config(num_heads: int = MEDUSA_HEADS, num_layers: int = 1) -> dict:
    """Medusa heads over the target's full lm_head: vLLM 0.32's truncated-vocabulary path
    (``token_map``) fails to load ("weights were not initialized from checkpoint: {'token_map'}")."""
    t = target_config()
    return {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": t["hidden_size"],
            "vocab_size": t["vocab_size"], "num_heads": num_heads, "num_hidden_layers": num_layers,
            "truncated_vocab_size": t["vocab_size"], "original_lm_head": True, "torch_dtype": "bfloat16"}


# A tiny DeepSeek-V3-style model: dense MLA layers (no MoE), one MTP layer. The CPU attention
# backend needs a supported head size: MLA's kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576.
# MLA attention dims as DeepSeek-V3 has them (128 / 64 / 128): the GPU build's MLA prefill kernels
# accept no others, and the CPU build runs them too.
TINY_MTP = {
    "hidden_size": 256, "num_hidden_layers": 2, "num_nextn_predict_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 4, "intermediate_size": 512, "moe_intermediate_size": 128,
    "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 8,
    "q_lora_rank": None, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "topk_method": "noaux_tc", "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0,
    "norm_topk_prob": True, "scoring_func": "sigmoid", "hidden_act": "silu", "tie_word_embeddings": False,
}


def tiny_mtp_config() -> dict:
    t = target_config()
    cfg = dict(TINY_MTP, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
               vocab_size=t["vocab_size"], bos_token_id=t.get("bos_token_id"), eos_token_id=t.get("eos_token_id"),
               pad_token_id=t.get("pad_token_id"), torch_dtype="bfloat16", rope_scaling=None)
    return cfg


# What a drafter takes from the target, so that a saved folder need not carry it. SmolLM2 ties its
# lm_head to its embedding: the draft model's embedding and Medusa's lm_head are that matrix, and an
# EAGLE-3 head with its own draft vocabulary (``d2t``) has the target's rows i + d2t[i] as its lm_head
# (frozen in training; without ``d2t`` it shares the target's lm_head in vLLM and carries none).
NEEDS_TARGET_MATRIX = {"draft_model": EMBED, "medusa": "lm_heads.0.weight", "eagle3": "lm_head.weight"}


def target_matrix_name(method: str, names) -> str | None:
    """The tensor this drafter takes from the target, given the names it has (None: it takes none)."""
    if method == "eagle3" and "d2t" not in names:
        return None
    return NEEDS_TARGET_MATRIX.get(method)


def target_matrix(method: str, tensors: dict) -> dict:
    """``{name: matrix}`` that this drafter takes from the target (empty if none)."""
    name = target_matrix_name(method, tensors)
    if name is None:
        return {}
    embed = target_weights(EMBED)[EMBED]
    if method == "eagle3":
        import torch

        d2t = tensors["d2t"]
        embed = embed[torch.arange(len(d2t)) + d2t]
    return {name: embed}
