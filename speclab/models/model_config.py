"""A model's ``config.json``, wherever it lives, and the numbers in it that decide its size.

A config comes from a dict, a shipped shape (``llama-3.1-8b``, ``shape:...``), a model folder or a
config.json path, or, for a profile's target, from disk when it is already provisioned (never a
download). ``Dims`` reads a Llama-style config's dimensions; ``role_of`` says whether it is a plain
model or an EAGLE / EAGLE-3 head, whose parameters lean on its target.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, SpeclabError
from ..files import cache_dir, is_complete
from .model_refs import target_path
from .profiles import Profile
from .provision import SMOLLM2_NAME
from .shapes import SHAPES, shape_config


def parse_config(path: Path) -> dict:
    """A config.json file's contents; a broken file is a one-line error that says what to do."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path} is not valid JSON ({err.msg}, line {err.lineno}): "
                          "fix it or fetch the model again") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text: fix it or fetch the model again") from None


def read_config(model: str | Path) -> dict | None:
    """A model's config.json from a local folder or the Hugging Face cache, never the network; None
    where neither has it."""
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        return parse_config(path / "config.json")
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(str(model), "config.json")
    except Exception:
        return None
    return parse_config(Path(cached)) if isinstance(cached, str) else None


def load_config(ref) -> dict:
    """A config dict from a dict, a shape name (``llama-3.1-8b`` or ``shape:...``), a folder or a config.json path."""
    if isinstance(ref, dict):
        return ref
    path = Path(str(ref))
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return parse_config(path)
    return shape_config(str(ref))


def role_of(config: dict, role: str | None = None) -> str:
    """"model", "eagle" or "eagle3": how the parameters are laid out (an EAGLE head leans on its target)."""
    if role:
        if role not in ("model", "eagle", "eagle3"):
            raise SpeclabError(f"unknown role {role!r}: use 'model', 'eagle' or 'eagle3'")
        return role
    archs = " ".join(config.get("architectures") or [])
    if "Eagle3" in archs or "draft_vocab_size" in config:
        return "eagle3"
    if "Eagle" in archs:
        return "eagle"
    return "model"


@dataclass(frozen=True)
class Dims:
    """The numbers that decide a Llama-style model's size."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    attention_bias: bool
    mlp_bias: bool
    draft_vocab: int

    @classmethod
    def of(cls, config: dict) -> "Dims":
        try:
            hidden, heads = config["hidden_size"], config["num_attention_heads"]
            return cls(
                layers=config["num_hidden_layers"],
                hidden=hidden,
                intermediate=config["intermediate_size"],
                heads=heads,
                kv_heads=config.get("num_key_value_heads") or heads,  # absent: plain multi-head attention
                head_dim=config.get("head_dim") or hidden // heads,
                vocab=config["vocab_size"],
                tied=bool(config.get("tie_word_embeddings", False)),
                attention_bias=bool(config.get("attention_bias", False)),
                mlp_bias=bool(config.get("mlp_bias", False)),
                draft_vocab=config.get("draft_vocab_size") or config["vocab_size"],
            )
        except KeyError as missing:
            raise SpeclabError(f"config has no {missing.args[0]!r}: "
                               "pass a Llama-style Hugging Face config.json") from None


def registered_role(ref) -> str | None:
    """The role of a shipped shape named by ``ref`` (EAGLE-1's config looks like a plain Llama)."""
    info = SHAPES.get(str(ref).removeprefix("shape:")) if isinstance(ref, str) else None
    return info.role if info else None


def provisioned_config(profile: Profile) -> dict | None:
    """The config.json of a profile's target when it is already on disk; None otherwise (never downloads)."""
    ref = profile.target
    if ref.startswith("shape:"):
        return load_config(ref)
    if ref == f"local:{SMOLLM2_NAME}":
        return load_config(target_path(profile)) if is_complete(cache_dir() / "models" / SMOLLM2_NAME) else None
    try:
        return read_config(ref)
    except ConfigError:  # a broken cached file: the estimate falls back to the shape, the engine will say more
        return None
