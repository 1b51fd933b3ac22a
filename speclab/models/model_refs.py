"""Model references -> what vLLM's ``model=`` takes, in one place.

A profile names its target and drafters as references: ``local:<name>`` (provisioned or built by
speclab on first use), ``shape:<name>`` (a folder holding only a published config.json, for
random weights) or a Hugging Face id (passed through, or its shape when ``SPECLAB_WEIGHTS=random``).
"""

from __future__ import annotations

from . import drafters, random_weights
from .profiles import Profile
from .provision import SMOLLM2_NAME, fetch_smollm2
from .shapes import shape_dir


def resolve_model(ref: str) -> str:
    """Turn a profile's model reference into what vLLM's ``model=`` takes.

    ``local:<name>`` is provisioned or built on first use; ``shape:<name>`` is a folder holding
    only a config.json (for dummy weights, see ``speclab.measure.synthetic``); a Hugging Face id passes
    through, or becomes its shape when ``SPECLAB_WEIGHTS=random`` (see ``speclab.models.random_weights``).
    """
    if random_weights.is_random():
        ref = random_weights.shape_for(ref)
    if ref.startswith("shape:"):
        return str(shape_dir(ref))
    if not ref.startswith("local:"):
        return ref
    name = ref.split(":", 1)[1]
    if name == SMOLLM2_NAME:
        return str(fetch_smollm2())
    return str(drafters.provide(name))  # built on first use: a drafter needs the target folder first


def target_path(profile: Profile) -> str:
    return resolve_model(profile.target)


def tokenizer_path(profile: Profile, model: str | None = None) -> str:
    """Where prompts for a profile's target (or for ``model``) are tokenized: the model itself, or
    SmolLM2 when it has random weights (a shape carries no tokenizer)."""
    model = model or target_path(profile)
    return str(fetch_smollm2()) if random_weights.is_weightless(model) else model
