"""Model shapes: published ``config.json`` files without weights, under ``data/shapes/<name>/``.

A shape is enough to count parameters and size a KV cache (``speclab.algorithms.memory``), and vLLM loads
a shape folder with ``load_format="dummy"`` to time a model it never downloaded. Profiles refer
to a shape as ``shape:<name>`` (e.g. ``shape:llama-3.1-8b``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import SpeclabError
from ..files import REPO_ROOT

SHAPES_DIR = REPO_ROOT / "data" / "shapes"


@dataclass(frozen=True)
class ShapeInfo:
    hf_id: str  # where the real weights are published
    role: str  # "model" (a full LLM), "eagle", "eagle3" or "dflash" (a drafter that leans on its target)
    published_params: int | None = None  # the size the publisher reports; None for heads


SHAPES: dict[str, ShapeInfo] = {
    "llama-3.1-8b": ShapeInfo("meta-llama/Llama-3.1-8B-Instruct", "model", 8_030_261_248),
    "llama-3.1-70b": ShapeInfo("meta-llama/Llama-3.1-70B-Instruct", "model", 70_553_706_496),
    "llama-3.2-1b": ShapeInfo("meta-llama/Llama-3.2-1B-Instruct", "model", 1_235_814_400),
    "smollm2-135m": ShapeInfo("HuggingFaceTB/SmolLM2-135M-Instruct", "model", 134_515_008),
    "eagle-llama3.1-8b": ShapeInfo("yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "eagle"),
    "eagle3-llama3.1-8b": ShapeInfo("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "eagle3"),
    "qwen3-8b": ShapeInfo("Qwen/Qwen3-8B", "model"),
    "qwen3-0.6b": ShapeInfo("Qwen/Qwen3-0.6B", "model"),
    "eagle3-qwen3-8b": ShapeInfo("AngelSlim/Qwen3-8B_eagle3", "eagle3"),
    "mimo-7b": ShapeInfo("XiaomiMiMo/MiMo-7B-RL", "model"),  # a target with one MTP layer (lesson 05)
    # a block drafter: 5 Qwen3 layers over 5 target layers' hidden states (timed in lesson 15, not counted)
    "dflash-qwen3-8b": ShapeInfo("z-lab/Qwen3-8B-DFlash-b16", "dflash"),
}


def list_shapes() -> list[str]:
    """Names of the shapes shipped in ``data/shapes`` (each has a config.json)."""
    return sorted(p.parent.name for p in SHAPES_DIR.glob("*/config.json"))


def shape_dir(name: str) -> Path:
    """The folder to hand to vLLM (``model=...``, ``load_format="dummy"``)."""
    name = name.removeprefix("shape:")
    folder = SHAPES_DIR / name
    if not (folder / "config.json").is_file():
        raise SpeclabError(f"unknown shape {name!r}: choose one of {', '.join(list_shapes())}")
    return folder


def shape_config(name: str) -> dict:
    """The shape's config.json as a dict."""
    return json.loads((shape_dir(name) / "config.json").read_text())


def shape_role(name: str) -> str:
    """"model", "eagle" or "eagle3" (how ``speclab.algorithms.memory`` counts the shape's parameters)."""
    info = SHAPES.get(name.removeprefix("shape:"))
    return info.role if info else "model"
