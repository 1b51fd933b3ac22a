"""Randomly initialised drafters, one builder per method, in the layouts of :mod:`speclab.models.drafter_layouts`.

:func:`speclab.models.drafters.provide` builds one into the cache when no trained drafter is shipped for
its method (and always for ``tiny-mtp``). The seed is fixed (``SEED``), so a builder makes the
same bytes every time, and its card says ``"trained": false``: it loads and runs, so a lesson works
end to end, but its acceptance is near zero. The order the random numbers are drawn in is part of
the output: change it and the cached drafters differ (bump ``BUILDER_VERSION``).
"""

from __future__ import annotations

from pathlib import Path

from .drafter_layouts import (DRAFT_MODEL_LAYERS, EAGLE3_AUX_LAYERS, EMBED, SEED, copy_tokenizer, eagle3_config,
                              layer_shapes, llama_config, medusa_config, random_card, target_weights, tiny_mtp_config,
                              write_folder)


def _randn(gen, *shape, std: float = 0.02):
    import torch

    return (torch.randn(*shape, generator=gen) * std).to(torch.bfloat16)


def _ones(n: int):
    import torch

    return torch.ones(n, dtype=torch.bfloat16)


def _layer(gen, prefix: str, cfg: dict, qkv_in: int | None = None, input_norm: bool = True) -> dict:
    """Random tensors of one Llama decoder layer in Hugging Face names."""
    return {f"{prefix}.{n}": _randn(gen, *shape) if len(shape) == 2 else _ones(shape[0])
            for n, shape in layer_shapes(cfg, qkv_in, input_norm).items()}


def _generator():
    import torch

    return torch.Generator().manual_seed(SEED)


def build_random_draft_model(out: Path) -> None:
    cfg = llama_config(DRAFT_MODEL_LAYERS, tie_word_embeddings=True)
    gen, h = _generator(), cfg["hidden_size"]
    tensors = {}
    for i in range(DRAFT_MODEL_LAYERS):
        tensors.update(_layer(gen, f"model.layers.{i}", cfg))
    tensors["model.norm.weight"] = _ones(h)
    tensors[EMBED] = target_weights(EMBED)[EMBED]
    write_folder(out, cfg, tensors, random_card("draft_model", "random layers with the target's embedding: "
                                                "loads and runs, proposes tokens the target rarely accepts"))
    copy_tokenizer(out)


def build_random_eagle(out: Path) -> None:
    cfg = llama_config(1)
    gen, h = _generator(), cfg["hidden_size"]
    tensors = _layer(gen, "layers.0", cfg, input_norm=False)
    tensors["fc.weight"] = _randn(gen, h, 2 * h)
    write_folder(out, cfg, tensors, random_card("eagle"))


def build_random_eagle3(out: Path) -> None:
    cfg = eagle3_config()
    gen, h = _generator(), cfg["hidden_size"]
    tensors = _layer(gen, "midlayer", cfg, qkv_in=2 * h)
    tensors["midlayer.hidden_norm.weight"] = _ones(h)
    tensors["norm.weight"] = _ones(h)
    tensors["fc.weight"] = _randn(gen, h, len(EAGLE3_AUX_LAYERS) * h)
    write_folder(out, cfg, tensors, random_card("eagle3"))


def build_random_medusa(out: Path) -> None:
    cfg = medusa_config()
    gen, h = _generator(), cfg["hidden_size"]
    tensors = {f"blocks.{i}.layers.{j}.weight": _randn(gen, h, h)
               for i in range(cfg["num_heads"]) for j in range(cfg["num_hidden_layers"])}
    tensors["lm_heads.0.weight"] = target_weights(EMBED)[EMBED]
    write_folder(out, cfg, tensors, random_card("medusa", "random residual blocks over the target's lm_head: "
                                                "loads and runs, proposes tokens the target rarely accepts"))


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


BUILDERS = {"draft_model": build_random_draft_model, "eagle": build_random_eagle, "eagle3": build_random_eagle3,
            "medusa": build_random_medusa, "mtp": build_tiny_mtp}
