"""How each shipped drafter was trained: one frozen recipe per method.

``train.train`` and ``python -m speclab.train`` both take their defaults from here, and the card
of a trained drafter carries the command that repeats its run (:meth:`Recipe.command`). How the
recipes came to be what they are is told in Part 2 of ``docs/appendix.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..errors import SpeclabError
from ..models import drafters

TRAIN_METHODS = ("eagle", "eagle3", "draft_model", "medusa")
# What the shipped drafters learned from (vLLM on H200s, bf16): the target's answers to the hand-written
# train prompts, to prompts it wrote itself, to prompts built around its own answers, and to documents it
# wrote; the README (drafters section) and Part 2 of docs/appendix.md describe the rows.
SHIPPED_DATA = drafters.SHIPPED_DIR / "selfdistill_gpu.jsonl.gz"
EVAL_K = 3  # draft tokens per step when a drafter is measured in vLLM


@dataclass(frozen=True)
class Recipe:
    """The settings of one drafter's training run (the keyword arguments of ``train.train``)."""

    method: str
    steps: int  # length of the learning-rate schedule
    lr: float
    batch_size: int = 32
    stop_after: int | None = None  # stop after this many steps of the schedule (None: run it all)
    data: Path = SHIPPED_DATA
    num_sequences: int | None = None  # the first N rows of ``data`` (None: all of them)
    val_fraction: float = 0.1  # prompts held back to pick the best step
    draft_vocab: int | None = None  # eagle3: its own lm_head over the N most frequent tokens of the data
    medusa_layers: int | None = None  # medusa: residual blocks per head (vLLM's num_hidden_layers)
    hand_written_repeats: int = 1  # each answer to a hand-written train prompt this many times per pass
    ttt_steps: int | None = None  # eagle, eagle3: draft steps unrolled in training ("training-time test")

    def train_kwargs(self) -> dict:
        """The recipe as keyword arguments of ``train.train``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "method"}

    def command(self, stopped_after: int | None = None) -> str:
        """The ``python -m speclab.train`` command line that repeats a run with these settings."""
        stop = self.stop_after if stopped_after is None else stopped_after
        parts = [f"python -m speclab.train --method {self.method} --data {self.data} "]
        if self.num_sequences:
            parts.append(f"--num-sequences {self.num_sequences} ")
        parts.append(f"--steps {self.steps} --batch-size {self.batch_size} --lr {self.lr} ")
        if stop is not None and stop != self.steps:
            parts.append(f"--stop-after {stop} ")
        parts.append(f"--val-fraction {self.val_fraction}")
        if self.draft_vocab:
            parts.append(f" --draft-vocab {self.draft_vocab}")
        if self.medusa_layers:
            parts.append(f" --medusa-layers {self.medusa_layers}")
        if self.hand_written_repeats > 1:
            parts.append(f" --hand-written-repeats {self.hand_written_repeats}")
        if self.ttt_steps is not None and self.ttt_steps != RECIPES[self.method].ttt_steps:
            parts.append(f" --ttt-steps {self.ttt_steps}")
        return "".join(parts)


RECIPES = {
    "eagle": Recipe("eagle", steps=9000, lr=1e-3, ttt_steps=3),
    "eagle3": Recipe("eagle3", steps=8400, lr=1e-3, draft_vocab=8192, ttt_steps=3),
    # the draft model and Medusa were trained before the last rows of the shipped data existed
    "draft_model": Recipe("draft_model", steps=7000, lr=3e-4, num_sequences=18673),
    "medusa": Recipe("medusa", steps=6000, lr=1e-3, num_sequences=18673, medusa_layers=8),
}


def recipe(method: str) -> Recipe:
    """The recipe that made the shipped drafter for ``method``."""
    if method not in RECIPES:
        raise SpeclabError(f"cannot train method {method!r}: choose one of {', '.join(TRAIN_METHODS)}")
    return RECIPES[method]
