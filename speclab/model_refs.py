"""Model references -> what vLLM's ``model=`` takes, in one place.

A profile names its target and drafters as references: ``local:<name>`` (provisioned or built by
speclab on first use), ``shape:<name>`` (a folder holding only a published config.json, for
random weights) or a Hugging Face id (passed through, or its shape when ``SPECLAB_WEIGHTS=random``).
"""

from __future__ import annotations

from . import drafters, weights
from .models import SMOLLM2_NAME, fetch_smollm2
from .profiles import Profile, get_profile
from .shapes import shape_dir


def resolve_model(ref: str) -> str:
    """Turn a profile's model reference into what vLLM's ``model=`` takes.

    ``local:<name>`` is provisioned or built on first use; ``shape:<name>`` is a folder holding
    only a config.json (for dummy weights, see ``speclab.synthetic``); a Hugging Face id passes
    through, or becomes its shape when ``SPECLAB_WEIGHTS=random`` (see ``speclab.weights``).
    """
    if weights.is_random():
        ref = weights.shape_for(ref)
    if ref.startswith("shape:"):
        return str(shape_dir(ref))
    if not ref.startswith("local:"):
        return ref
    name = ref.split(":", 1)[1]
    if name == SMOLLM2_NAME:
        return str(fetch_smollm2())
    return str(drafters.provide(name))  # built on first use: a drafter needs the target folder first


def target_path(profile: str | Profile | None = None) -> str:
    return resolve_model(get_profile(profile).target)


def tokenizer_path(profile: str | Profile | None = None, model: str | None = None) -> str:
    """Where prompts for a profile's target (or for ``model``) are tokenized: the model itself, or
    SmolLM2 when it has random weights (a shape carries no tokenizer)."""
    model = model or target_path(profile)
    return str(fetch_smollm2()) if weights.is_weightless(model) else model
