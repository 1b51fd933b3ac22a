"""vLLM ``speculative_config`` builders, one per method, their fields checked as they are built.

Each builder returns the plain dict that ``LLM(speculative_config=...)`` and the server's
``--speculative-config '<json>'`` take; ``check_fields`` refuses, in one line that says what to do,
what needs neither vLLM nor files. Checks against the installed vLLM and the models' own files are
``speclab.vllm_layer.validation``; old command lines' removed flags, ``speclab.vllm_layer.migration``.
"""

from __future__ import annotations

import difflib
import inspect

from ..errors import ConfigError  # noqa: F401  (lessons catch configs.ConfigError)
from ..models.profiles import Profile

METHODS = ("ngram", "draft_model", "eagle", "eagle3", "mtp", "medusa", "suffix", "ngram_gpu", "dflash", "dspark")
LOOKUP_METHODS = ("ngram", "ngram_gpu")  # prompt lookup: on the CPU between steps, or on the device inside one
BLOCK_DRAFTERS = ("dflash", "dspark")  # draft all k tokens in one forward pass (vLLM turns parallel_drafting on)
DRAFTS_FROM_EARLIER_REQUESTS = ("suffix",)  # suffix decoding's tree keeps past answers: a repeat is drafted from them
DEFAULT_K = 2  # the seed benchmark's --num-spec-tokens default
DEFAULT_LOOKUP_MAX = 5
DEFAULT_LOOKUP_MIN = 2
LLAMA_TARGET = "meta-llama/Llama-3.1-8B-Instruct"
DEFAULT_EAGLE = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
DEFAULT_EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"


def check_k(k) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
        raise ConfigError(f"num_speculative_tokens (k) must be a positive integer, got {k!r}: use k >= 1 (2-5 is "
                          "typical)")
    return k


# every key speclab's builders (and speclab.measure.synthetic) put in a config
SPECLAB_KEYS = ("method", "num_speculative_tokens", "model", "prompt_lookup_max", "prompt_lookup_min", "max_model_len",
                "enforce_eager", "draft_tensor_parallel_size", "quantization", "use_heterogeneous_vocab",
                "parallel_drafting", "disable_padded_drafter_batch", "rejection_sample_method", "draft_sample_method",
                "synthetic_acceptance_rates", "synthetic_acceptance_length")
# how a drafter picks its tokens: its argmax (vLLM's default) or a sample from its distribution (lesson 13)
DRAFT_SAMPLE_METHODS = ("greedy", "probabilistic")
SAMPLING_DRAFTERS = ("draft_model", "eagle", "eagle3", "mtp")  # vLLM's proposers that keep the draft's probabilities
POSITIVE_INT_KEYS = ("prompt_lookup_max", "prompt_lookup_min", "draft_tensor_parallel_size", "max_model_len")
BOOL_KEYS = ("enforce_eager", "use_heterogeneous_vocab", "parallel_drafting", "disable_padded_drafter_batch")
# vLLM has no default drafter for these: without ``model`` it stops at start-up
NEEDS_MODEL = {
    "draft_model": "method draft_model needs a draft model: pass model=... (e.g. meta-llama/Llama-3.2-1B-Instruct)",
    "eagle": "method eagle needs its drafter: pass model=<an EAGLE head folder or Hugging Face id>",
    "eagle3": "method eagle3 needs its drafter: pass model=<an EAGLE-3 head folder or Hugging Face id>",
    "medusa": "method medusa needs its heads: pass model=<a Medusa head folder for your target>",
    "dflash": "method dflash needs its block drafter: pass model=<a DFlash drafter folder or Hugging Face id>",
    "dspark": "method dspark needs its block drafter: pass model=<a DSpark drafter folder or Hugging Face id>",
}


def did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_fields(config) -> dict:
    """Types, ranges, the n-gram window and the required drafter: what needs neither vLLM nor files.

    The builders, ``validate`` and ``migrate_command`` all end here, so a config is refused with
    the same line wherever it was made.
    """
    if not isinstance(config, dict):
        raise ConfigError(f"a speculative config is a dict, not {type(config).__name__} {config!r}: "
                          "build one with configs.build(method, k), e.g. configs.build('ngram', 3)")
    method = config.get("method")
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}{did_you_mean(method, METHODS)}: choose one of "
                          f"{', '.join(METHODS)}")
    check_k(config.get("num_speculative_tokens"))
    for key in POSITIVE_INT_KEYS:
        value = config.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(f"{key} must be a whole number >= 1, got {value!r}")
    for key in BOOL_KEYS:
        if key in config and not isinstance(config[key], bool):
            raise ConfigError(f"{key} must be True or False, got {config[key]!r}")
    lo, hi = config.get("prompt_lookup_min"), config.get("prompt_lookup_max")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"prompt_lookup_min ({lo}) > prompt_lookup_max ({hi}): lower the min or raise the max")
    if config.get("num_speculative_tokens_per_batch_size") is not None:
        _check_schedule(config["num_speculative_tokens_per_batch_size"])
    if "draft_sample_method" in config:
        _check_draft_sampling(config)
    model = config.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ConfigError(f"model must be a folder or a Hugging Face id (text), got {model!r}")
    if method in NEEDS_MODEL and not model:
        raise ConfigError(NEEDS_MODEL[method])
    quant = config.get("quantization")
    if quant == "int8":
        raise ConfigError("quantization 'int8' is not a method vLLM has: use 'fp8' (its 8-bit on-the-fly scheme) "
                          "or a pre-quantized drafter checkpoint")
    if quant is not None and not isinstance(quant, str):
        raise ConfigError(f"quantization must be a method name such as 'fp8', got {quant!r}")
    return config


def _check_draft_sampling(config: dict) -> None:
    """A sampled draft needs a drafter with a distribution, and the target's vocabulary to compare it with."""
    how, method = config["draft_sample_method"], config["method"]
    if how not in DRAFT_SAMPLE_METHODS:
        raise ConfigError(f"draft_sample_method must be one of {', '.join(map(repr, DRAFT_SAMPLE_METHODS))}, "
                          f"got {how!r}{did_you_mean(how, DRAFT_SAMPLE_METHODS)}")
    if how == "probabilistic" and method not in SAMPLING_DRAFTERS:
        raise ConfigError(f"draft_sample_method 'probabilistic' needs a drafter with a distribution "
                          f"({', '.join(SAMPLING_DRAFTERS)}); {method} proposes tokens without one")
    if how == "probabilistic" and config.get("use_heterogeneous_vocab"):
        raise ConfigError("draft_sample_method 'probabilistic' compares the draft's distribution with the target's, "
                          "which needs one vocabulary: drop use_heterogeneous_vocab or draft greedily")


def _check_schedule(schedule) -> None:
    """vLLM's dynamic k: ``[[first batch, last batch, k], ...]``, from batch 1 upward, ranges apart."""
    hint = "give [[first batch, last batch, k], ...] in order from batch 1, e.g. [[1, 4, 3], [5, 5, 0]]"
    name = "num_speculative_tokens_per_batch_size"
    if not isinstance(schedule, (list, tuple)) or not schedule:
        raise ConfigError(f"{name} must be a non-empty list: {hint}")
    end = 0
    for entry in schedule:
        if (not isinstance(entry, (list, tuple)) or len(entry) != 3
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in entry)):
            raise ConfigError(f"{name} entry {entry!r} is not three whole numbers: {hint}")
        first, last, k = entry
        starts_right = first == 1 if end == 0 else first > end
        if not starts_right:
            raise ConfigError(f"{name} entry {list(entry)} must start at batch {end + 1}"
                              f"{'' if end == 0 else ' or later'}: {hint}")
        if last < first or k < 0:
            raise ConfigError(f"{name} entry {list(entry)} needs first <= last and k >= 0: {hint}")
        end = last


def ngram(k: int = DEFAULT_K, prompt_lookup_max: int = DEFAULT_LOOKUP_MAX,
          prompt_lookup_min: int = DEFAULT_LOOKUP_MIN) -> dict:
    """Prompt lookup: propose the tokens that followed the latest matching n-gram of the context."""
    return check_fields({"method": "ngram", "num_speculative_tokens": k,
                         "prompt_lookup_max": prompt_lookup_max, "prompt_lookup_min": prompt_lookup_min})


def ngram_gpu(k: int = DEFAULT_K, prompt_lookup_max: int = DEFAULT_LOOKUP_MAX,
              prompt_lookup_min: int = DEFAULT_LOOKUP_MIN) -> dict:
    """Prompt lookup on the device: the same rule as ``ngram``, as tensor ops inside the step.

    ``ngram`` searches on the CPU between steps, which forces a device-to-host copy of every new
    token and turns vLLM's asynchronous scheduling off; ``ngram_gpu`` keeps it on, at the price of
    sizing every step for k drafted tokens, matched or not (vLLM counts each step as a draft).
    """
    return check_fields({"method": "ngram_gpu", "num_speculative_tokens": k,
                         "prompt_lookup_max": prompt_lookup_max, "prompt_lookup_min": prompt_lookup_min})


def suffix(k: int = DEFAULT_K) -> dict:
    """Suffix decoding (Arctic Inference): a suffix tree over the prompt and past outputs."""
    return check_fields({"method": "suffix", "num_speculative_tokens": k})


def draft_model(model: str | None = None, k: int = DEFAULT_K, *, max_model_len: int | None = None,
                enforce_eager: bool | None = None, draft_tensor_parallel_size: int | None = None,
                use_heterogeneous_vocab: bool = False, parallel_drafting: bool = False,
                quantization: str | None = None, draft_sample_method: str | None = None) -> dict:
    """A separate, smaller model of the same family proposes k tokens autoregressively."""
    check_k(k)
    if not model:
        raise ConfigError(NEEDS_MODEL["draft_model"])
    cfg = {"method": "draft_model", "model": str(model), "num_speculative_tokens": k}
    optional = {"max_model_len": max_model_len, "enforce_eager": enforce_eager,
                "draft_tensor_parallel_size": draft_tensor_parallel_size, "quantization": quantization,
                "draft_sample_method": draft_sample_method}
    cfg.update({key: v for key, v in optional.items() if v is not None})
    if use_heterogeneous_vocab:
        cfg["use_heterogeneous_vocab"] = True
    if parallel_drafting:
        cfg["parallel_drafting"] = True
    return check_fields(cfg)


def _eagle(method: str, default: str, model, k, target, disable_padded_drafter_batch, parallel_drafting,
           draft_tensor_parallel_size=None, draft_sample_method=None) -> dict:
    check_k(k)
    model = str(model or default)
    if model == default and target is not None and str(target) != LLAMA_TARGET:
        raise ConfigError(
            f"{method} drafter {default} was trained for {LLAMA_TARGET}, not {target}: "
            f"pass model=<an {method.upper()} drafter trained for your target>"
        )
    cfg = {"method": method, "model": model, "num_speculative_tokens": k}
    if disable_padded_drafter_batch:
        cfg["disable_padded_drafter_batch"] = True
    if parallel_drafting:
        cfg["parallel_drafting"] = True
    if draft_tensor_parallel_size is not None:
        cfg["draft_tensor_parallel_size"] = draft_tensor_parallel_size
    if draft_sample_method is not None:
        cfg["draft_sample_method"] = draft_sample_method
    return check_fields(cfg)


def eagle(model: str | None = None, k: int = DEFAULT_K, *, target: str | None = LLAMA_TARGET,
          disable_padded_drafter_batch: bool = False, parallel_drafting: bool = False,
          draft_tensor_parallel_size: int | None = None, draft_sample_method: str | None = None) -> dict:
    """EAGLE: a one-layer head that drafts from the target's last hidden state."""
    return _eagle("eagle", DEFAULT_EAGLE, model, k, target, disable_padded_drafter_batch, parallel_drafting,
                  draft_tensor_parallel_size, draft_sample_method)


def eagle3(model: str | None = None, k: int = DEFAULT_K, *, target: str | None = LLAMA_TARGET,
           disable_padded_drafter_batch: bool = False, parallel_drafting: bool = False,
           draft_tensor_parallel_size: int | None = None, draft_sample_method: str | None = None) -> dict:
    """EAGLE-3: drafts from low, middle and high hidden states of the target, fused.

    Which target layers it reads is the drafter's own setting (``eagle_aux_hidden_state_layer_ids``
    in its config.json), not a speculative-config field.
    """
    return _eagle("eagle3", DEFAULT_EAGLE3, model, k, target, disable_padded_drafter_batch, parallel_drafting,
                  draft_tensor_parallel_size, draft_sample_method)


def mtp(k: int = DEFAULT_K, model: str | None = None) -> dict:
    """Multi-token prediction: the target's own MTP layers draft (DeepSeek-V3, Qwen3-Next, MiMo...)."""
    check_k(k)
    cfg = {"method": "mtp", "num_speculative_tokens": k}
    if model:
        cfg["model"] = str(model)
    return check_fields(cfg)


def medusa(model: str | None = None, k: int = DEFAULT_K) -> dict:
    """Medusa: extra decoding heads, head i guesses the token i+1 steps ahead (removed in vLLM 0.33)."""
    check_k(k)
    return check_fields({"method": "medusa", "model": str(model) if model else model, "num_speculative_tokens": k})


def _block(method: str, model, k) -> dict:
    check_k(k)
    if not model:
        raise ConfigError(NEEDS_MODEL[method])
    return check_fields({"method": method, "model": str(model), "num_speculative_tokens": k})


def dflash(model: str | None = None, k: int = DEFAULT_K) -> dict:
    """DFlash: a small block-diffusion drafter fills k masked positions in one forward pass.

    Like EAGLE-3 it reads hidden states from several target layers (``dflash_config.target_layer_ids``
    in its config.json); unlike it, the k tokens come from one pass, not k.
    """
    return _block("dflash", model, k)


def dspark(model: str | None = None, k: int = DEFAULT_K) -> dict:
    """DSpark: a block drafter (one pass per block of ``dspark_block_size`` tokens) with a small
    sequential head that makes each token in the block see the one before it; k must be at least the block."""
    return _block("dspark", model, k)


BUILDERS = {"ngram": ngram, "draft_model": draft_model, "eagle": eagle, "eagle3": eagle3,
            "mtp": mtp, "medusa": medusa, "suffix": suffix, "ngram_gpu": ngram_gpu, "dflash": dflash,
            "dspark": dspark}


def build(method: str, k: int = DEFAULT_K, **options) -> dict:
    """Build the config for ``method`` by name (what papermill's ``-p method eagle3`` feeds)."""
    if method in (None, "", "none", "baseline"):
        return None
    if method not in BUILDERS:
        raise ConfigError(f"unknown method {method!r}{did_you_mean(method, METHODS)}: choose one of "
                          f"{', '.join(METHODS)}")
    accepted = [name for name in inspect.signature(BUILDERS[method]).parameters if name != "k"]
    for name in options:
        if name not in accepted:
            raise ConfigError(f"method {method} takes no option {name!r}{did_you_mean(name, accepted)}: "
                              f"its options are {', '.join(accepted) or 'none'}")
    return BUILDERS[method](k=k, **options)


def for_profile(profile: Profile, method: str, k: int = DEFAULT_K, **options) -> dict | None:
    """The config for ``method`` with the profile's own drafter (what a lesson's ``method`` parameter picks).

    ``local:`` drafters are resolved when an engine opens; a profile without a drafter for
    ``method`` gets one clear line.
    """
    if method in (None, "", "none", "baseline"):
        return None
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}{did_you_mean(method, METHODS)}: choose one of "
                          f"{', '.join(METHODS)}")
    if method in (*LOOKUP_METHODS, "suffix"):
        return build(method, k, **options)
    drafter = options.pop("model", None) or profile.drafter(method)
    if method == "mtp":
        return mtp(k, **options)  # the target's own layers draft; the profile's mtp target is a lesson's concern
    if drafter is None:
        raise ConfigError(f"profile {profile.name!r} has no {method} drafter: pass model=... or choose another profile")
    if method in ("eagle", "eagle3"):
        options.setdefault("target", None if drafter.startswith("local:") else profile.target)
    return build(method, k, model=drafter, **options)
