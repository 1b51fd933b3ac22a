"""Drafters for the CPU profile's target (SmolLM2-135M-Instruct), in the layouts vLLM 0.32 loads.

``provide(name)`` answers a profile's ``local:<name>`` drafter reference with a folder:

- the trained drafter shipped in ``data/drafters/<method>/`` when there is one (its
  ``card.json`` says how it was trained and what acceptance vLLM measured with it), assembled
  into the cache by ``loadable`` (see "How the trained drafters are stored" below);
- otherwise a randomly initialised drafter of the same shape, built once into the cache
  (deterministic seed, labelled ``"trained": false`` in its card). It loads and runs, so a
  lesson works end to end, but its acceptance is near zero: an untrained drafter is pure cost.

Each method wants its own layout (read from vLLM's model files):

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

How the trained drafters are stored. Training (:mod:`speclab.train`) writes a bf16
``model.safetensors`` that vLLM loads. ``data/drafters/<method>/`` keeps them smaller, in
``model.int8.safetensors`` (written by ``pack``):

- each weight matrix as int8 with one float32 scale per output row (the row's largest
  magnitude / 127, in ``<name>.scale``): half the bytes of bf16, and each weight within half a
  step (row max / 254) of the trained one; norms and ``d2t`` stay as they are;
- without what the target supplies: the draft model's embedding and Medusa's lm_head (SmolLM2's
  embedding, which is also its lm_head), and EAGLE-3's lm_head (the target's rows ``i + d2t[i]``:
  its draft vocabulary's rows were frozen in training).

``loadable`` turns such a folder back into one vLLM loads, once, in the cache: weights
dequantized to bf16, the target's matrices added. A packed drafter's ``card.json`` says so
(``storage``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .errors import SpeclabError
from .models import COMPLETE, REPO_ROOT, atomic_folder, cache_dir, fetch_smollm2, is_complete

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
WEIGHTS = "model.safetensors"  # what vLLM loads (bf16)
PACKED = "model.int8.safetensors"  # how data/drafters stores trained weights (``pack``); vLLM cannot load it
# Bump when a builder's layout changes: cached drafters from an older builder are then rebuilt.
BUILDER_VERSION = 3
# Bump when the packed layout or the assembly changes: folders ``loadable`` assembled are then rebuilt.
PACK_VERSION = 1
CARD = "card.json"
SOURCE = "speclab-source.json"  # in an assembled folder: what it was made from (``_source_stamp``)
EMBED = "model.embed_tokens.weight"


def method_of(name: str) -> str:
    try:
        return NAMES[name]
    except KeyError:
        raise SpeclabError(f"unknown drafter {name!r}: choose one of {', '.join(NAMES)}") from None


def eagle3_aux_layers() -> list[int]:
    """The target layers the EAGLE-3 drafter reads (also written into its config.json)."""
    return list(EAGLE3_AUX_LAYERS)


def shipped(method: str) -> Path | None:
    """The trained drafter folder in ``data/drafters/<method>/``, if one is shipped (packed or bf16)."""
    folder = SHIPPED_DIR / method
    if all((folder / f).is_file() for f in ("config.json", CARD)) and any(
            (folder / f).is_file() for f in (PACKED, WEIGHTS)):
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
    """A folder vLLM loads for a drafter saved by :mod:`speclab.train` or packed by :func:`pack`.

    A bf16 folder with every tensor vLLM needs loads as saved (EAGLE heads, as training writes
    them). Any other is assembled into a cache folder keyed by the source folder: weights
    dequantized to bf16, plus the matrices a drafter takes from the target (``target_matrix``).
    It is rebuilt when the source's files change (``_source_stamp``).
    """
    folder = Path(folder)
    if not (folder / PACKED).is_file() and _has_target_matrix(method, folder):
        return folder
    import hashlib

    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    final = cache_dir() / "drafters" / f"{method}-{key}"
    stamp = _source_stamp(folder)
    if force or not (is_complete(final) and _read_json(final / SOURCE) == stamp):
        with atomic_folder(final) as out:
            assemble(method, folder, out)
            (out / SOURCE).write_text(json.dumps(stamp, indent=2) + "\n")
    return final


# What a drafter takes from the target, so that a saved folder need not carry it. SmolLM2 ties its
# lm_head to its embedding: the draft model's embedding and Medusa's lm_head are that matrix, and an
# EAGLE-3 head with its own draft vocabulary (``d2t``) has the target's rows i + d2t[i] as its lm_head
# (frozen in training; without ``d2t`` it shares the target's lm_head in vLLM and carries none).
NEEDS_TARGET_MATRIX = {"draft_model": EMBED, "medusa": "lm_heads.0.weight", "eagle3": "lm_head.weight"}


def _target_matrix_name(method: str, names) -> str | None:
    if method == "eagle3" and "d2t" not in names:
        return None
    return NEEDS_TARGET_MATRIX.get(method)


def target_matrix(method: str, tensors: dict) -> dict:
    """``{name: matrix}`` that this drafter takes from the target (empty if none)."""
    name = _target_matrix_name(method, tensors)
    if name is None:
        return {}
    embed = target_weights(EMBED)[EMBED]
    if method == "eagle3":
        import torch

        d2t = tensors["d2t"]
        embed = embed[torch.arange(len(d2t)) + d2t]
    return {name: embed}


def _has_target_matrix(method: str, folder: Path) -> bool:
    from safetensors import safe_open

    with safe_open(str(folder / WEIGHTS), framework="pt") as f:
        names = set(f.keys())
    name = _target_matrix_name(method, names)
    return name is None or name in names


def _source_stamp(folder: Path) -> dict:
    """Size and modification time of the source's files: an assembled folder is reused only while they match."""
    files = {}
    for name in ("config.json", CARD, PACKED, WEIGHTS):
        if (folder / name).is_file():
            st = (folder / name).stat()
            files[name] = [st.st_size, st.st_mtime_ns]
    return {"source": str(folder.resolve()), "pack_version": PACK_VERSION, "files": files}


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


# ---------------------------------------------------------------- compact storage (data/drafters)

def quantize(w):
    """int8 rows and one float32 scale per row: w ~ q * scale[:, None], within scale / 2 per weight."""
    import torch

    w = w.float()
    scale = w.abs().amax(dim=1) / 127
    q = torch.round(w / torch.where(scale > 0, scale, 1.0)[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def dequantize(q, scale):
    import torch

    return (q.float() * scale[:, None]).to(torch.bfloat16)


# Measured side by side on the 24 held-out prompts (k=3, 64 tokens, CPU, one baseline): int8 rows moved
# acceptance length by +0.000 (draft_model), +0.023 (eagle3), +0.006 (medusa) and -0.028 (eagle). A method
# here keeps its bf16 weights as trained, for the reason given (written into its card).
KEEP_BF16 = {"eagle": "stored as int8 rows, its acceptance length fell by 0.028 (2.042 -> 2.014)"}


def pack(folder: str | Path, out: str | Path) -> Path:
    """Store a trained bf16 drafter as ``data/drafters`` ships it: ``PACKED`` + config.json + card.json.

    Every 2-D float tensor becomes int8 rows with a float32 scale each (``quantize``; the scale under
    ``<name>.scale``), about half of bf16's bytes; 1-D tensors (norms) and integer ones (``d2t``) stay
    as they are. A matrix equal to what the target supplies (``target_matrix``) is left out. A method
    in ``KEEP_BF16`` keeps its ``model.safetensors`` as trained. ``loadable`` makes a folder vLLM
    loads out of either. ``out`` may be ``folder`` itself.
    """
    import torch
    from safetensors.torch import load_file, save_file

    folder, out = Path(folder), Path(out)
    if not (folder / WEIGHTS).is_file():
        raise SpeclabError(f"nothing to pack: {folder} has no {WEIGHTS} (a packed folder holds {PACKED})")
    card, config = read_card(folder), (folder / "config.json").read_text()
    method = card["method"]
    if method in KEEP_BF16:
        card["storage"] = f"{WEIGHTS} in bf16 as trained ({KEEP_BF16[method]})"
        weights = open(folder / WEIGHTS, "rb").read()

        def save(scratch):
            (scratch / WEIGHTS).write_bytes(weights)
    else:
        tensors = load_file(str(folder / WEIGHTS))
        derived = target_matrix(method, tensors)
        packed = {}
        for name, t in tensors.items():
            if name in derived and torch.equal(t, derived[name]):
                continue
            if t.is_floating_point() and t.dim() == 2:
                packed[name], packed[f"{name}.scale"] = quantize(t)
            else:
                packed[name] = t
        how = "rebuilt from the target's embedding and d2t" if method == "eagle3" else "the target's embedding"
        card["storage"] = (f"{PACKED}: int8 with one float32 scale per output row (row absmax / 127), 1-D and "
                           "integer tensors as trained; speclab.drafters.loadable dequantizes it to bf16"
                           + "".join(f" and adds {name}, {how}" for name in derived if name not in packed))

        def save(scratch):
            save_file({k: v.contiguous() for k, v in packed.items()}, str(scratch / PACKED),
                      metadata={"format": "pt", "speclab_pack_version": str(PACK_VERSION)})
    with atomic_folder(out) as scratch:
        save(scratch)
        (scratch / "config.json").write_text(config)
        (scratch / CARD).write_text(json.dumps(card, indent=2) + "\n")
    (out / COMPLETE).unlink(missing_ok=True)  # a shipped folder needs no cache marker
    return out


def read_weights(folder: str | Path) -> dict:
    """A saved drafter's tensors in bf16: its ``model.safetensors``, or its packed file dequantized."""
    from safetensors.torch import load_file

    folder = Path(folder)
    if not (folder / PACKED).is_file():
        return load_file(str(folder / WEIGHTS))
    packed = load_file(str(folder / PACKED))
    return {name: dequantize(t, packed[f"{name}.scale"]) if f"{name}.scale" in packed else t
            for name, t in packed.items() if not name.endswith(".scale")}


# ---------------------------------------------------------------- helpers shared with speclab.train

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


# The tensors of one Llama decoder layer, in Hugging Face's (and vLLM's) names and in the order they are
# made: the random builders here and the trained layers of speclab.train both follow it.
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


def _layer(gen, prefix: str, cfg: dict, qkv_in: int | None = None, input_norm: bool = True) -> dict:
    """Random tensors of one Llama decoder layer in Hugging Face names."""
    return {f"{prefix}.{n}": _randn(gen, *shape) if len(shape) == 2 else _ones(shape[0])
            for n, shape in layer_shapes(cfg, qkv_in, input_norm).items()}


def _generator():
    import torch

    return torch.Generator().manual_seed(SEED)


# ---------------------------------------------------------------- random drafters, one per method

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


def eagle3_config(draft_vocab_size: int | None = None) -> dict:
    """Without ``draft_vocab_size`` the head shares the target's lm_head (full vocabulary)."""
    return llama_config(1, draft_vocab_size=draft_vocab_size or target_config()["vocab_size"],
                        eagle_aux_hidden_state_layer_ids=eagle3_aux_layers(),
                        target_hidden_size=target_config()["hidden_size"])


def build_random_eagle3(out: Path) -> None:
    cfg = eagle3_config()
    gen, h = _generator(), cfg["hidden_size"]
    tensors = _layer(gen, "midlayer", cfg, qkv_in=2 * h)
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
    tensors["lm_heads.0.weight"] = target_weights(EMBED)[EMBED]
    write_folder(out, cfg, tensors, random_card("medusa", "random residual blocks over the target's lm_head: "
                                                "loads and runs, proposes tokens the target rarely accepts"))


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
    """A bf16 folder vLLM loads: the saved weights (dequantized if packed) + the target's matrix."""
    tensors = read_weights(source)
    for name, matrix in target_matrix(method, tensors).items():
        tensors.setdefault(name, matrix)
    config = json.loads((Path(source) / "config.json").read_text())
    if method == "draft_model":
        config["tie_word_embeddings"] = True
    write_folder(out, config, tensors, read_card(source))
    if method == "draft_model":  # a whole model: with the tokenizer it also loads on its own
        copy_tokenizer(out)


BUILDERS = {"draft_model": build_random_draft_model, "eagle": build_random_eagle, "eagle3": build_random_eagle3,
            "medusa": build_random_medusa, "mtp": build_tiny_mtp}
