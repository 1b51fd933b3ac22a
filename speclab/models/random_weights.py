"""Real or random weights: a GPU profile's every cell, without its checkpoints.

A workshop machine with no network (or no gated access) cannot fetch Llama-3.1-8B, yet the time
a step takes depends on the model's shape, not on its weights. With ``SPECLAB_WEIGHTS=random``
(``speclab run --weights random``) each Hugging Face model of a profile is replaced by its
published ``config.json`` (``data/shapes``), which vLLM loads with random weights
(``load_format="dummy"``). Prompts are tokenized by SmolLM2's tokenizer, which speclab
provisions offline: its 49,152 ids are valid in the larger vocabularies of Llama-3 and Qwen3.

Timings and memory are those of the real models. Acceptance, margins and text are not:
random weights draft and verify noise. Every result written in this mode carries ``LABEL``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import SpeclabError
from .shapes import SHAPES

ENV = "SPECLAB_WEIGHTS"
MODES = ("real", "random")
LABEL = "random weights: the published shapes with load_format=dummy; timings are real, acceptance and text are not"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def mode() -> str:
    """``real`` (the default) or ``random``, from ``SPECLAB_WEIGHTS``."""
    value = os.environ.get(ENV, "real").strip().lower() or "real"
    if value not in MODES:
        raise SpeclabError(f"{ENV}={value!r} is not a weights mode: set it to real or random (or unset it)")
    return value


def is_random() -> bool:
    return mode() == "random"


def stored_name(profile_name: str, random: bool | None = None) -> str:
    """The name a profile's measurements are stored under: ``<profile>-random`` where its weights were
    random (``random``; None: this process's mode), so that they never pass for the real model's."""
    return f"{profile_name}-random" if (is_random() if random is None else random) else profile_name


_loaded_random = False  # set once an engine of this process loaded random weights


def note_loaded() -> None:
    """Called by ``speclab.vllm_layer.engine`` when it hands vLLM a shape: from then on results carry ``LABEL``."""
    global _loaded_random
    _loaded_random = True


def label() -> str | None:
    """What this process's results must say about their weights: ``LABEL`` once an engine ran on random
    weights, else None (a lesson of a random-weights run that opened no engine, or one on speclab's own
    SmolLM2 models, measured real weights)."""
    return LABEL if _loaded_random else None


def check_profile(profile) -> None:
    """Random weights only replace Hugging Face models: one line for a profile that has none."""
    if is_random() and profile.offline:
        raise SpeclabError(f"profile {profile.name!r} runs speclab's own models, which need no download: "
                           "random weights are for gpu-llama8b and gpu-qwen3-8b (or unset SPECLAB_WEIGHTS)")


def shape_for(model: str) -> str:
    """A Hugging Face id -> ``shape:<name>`` whose config.json it publishes; a local folder passes through."""
    if model.startswith(("shape:", "local:")) or Path(model).exists():
        return model
    for name, info in SHAPES.items():
        if info.hf_id == model:
            return f"shape:{name}"
    known = ", ".join(sorted(info.hf_id for info in SHAPES.values()))
    raise SpeclabError(f"no published shape for {model!r}, so it cannot load with random weights: use one of {known}")


def is_weightless(folder: str | Path) -> bool:
    """True for a folder that holds a config.json and no weight files: vLLM must load it with random weights."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        return False
    return not any(p.name.endswith(WEIGHT_SUFFIXES) for p in folder.iterdir())
