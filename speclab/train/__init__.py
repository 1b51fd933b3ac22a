"""Train drafters for SmolLM2-135M-Instruct by self-distillation, in plain torch (CPU or GPU).

Three steps, each a module:

1. :mod:`~speclab.train.data` (``generate_data``): the target answers prompts with vLLM: the
   hand-written ``train`` set, thousands it writes itself (``self_written_prompts``, Magpie-style),
   prompts built around its own answers (``passage_prompts``: RAG, summaries, code edits) and
   documents it writes with a summary or question over each (``document_rows``);
   :mod:`~speclab.train.prompt_builders` builds those prompts.
2. :mod:`~speclab.train.hidden_states` (``target_features``): one forward pass of the target over every
   prompt + answer gives the hidden states the heads read and the label at every place.
3. :mod:`~speclab.train.loop` (``train``): fits one drafter from :mod:`~speclab.train.heads`
   (``draft_model``, ``eagle``, ``eagle3``, ``medusa``, built of :mod:`~speclab.train.layers`) and
   saves it in the layout vLLM loads (see :mod:`speclab.models.drafter_layouts`), with a ``card.json``.

:mod:`~speclab.train.recipes` holds how each shipped drafter was trained (``recipe``), and
:mod:`~speclab.train.evaluate` measures acceptance with vLLM. ``python -m speclab.train --method
eagle`` trains with the shipped recipe and saves; ``--evaluate`` then measures acceptance on the
held-out prompts and writes it into the card.
"""

from ..errors import SpeclabError
from .data import (DATA_FILE, answer_rows, chat_frame, document_rows, generate_data, is_hand_written, load_data,
                   self_written_prompts, user_turns)
from .evaluate import evaluate
from .heads import DRAFT_INIT_LAYERS, DraftModel, Eagle3Head, EagleHead, Head, MedusaHeads, build_drafter, ttt_loss
from .hidden_states import MAX_LEN, Features, features_for, load_target, target_features, vocab_subset
from .layers import LlamaLayer, rms_norm, rope_theta, rotary
from .loop import TrainResult, estimated_acceptance_length, held_out_accuracy, make_batch, save, train
from .prompt_builders import (CHAT_STARTERS, DOCUMENT_KINDS, DOCUMENT_TASKS, DOCUMENT_TOPICS, LANGUAGES, PASSAGE_TASKS,
                              STARTERS, document_prompts, document_tasks, passage_prompts)
from .recipes import EVAL_K, RECIPES, SHIPPED_DATA, TRAIN_METHODS, Recipe, recipe

__all__ = [
    "CHAT_STARTERS", "DATA_FILE", "DOCUMENT_KINDS", "DOCUMENT_TASKS", "DOCUMENT_TOPICS", "DRAFT_INIT_LAYERS",
    "DraftModel", "EVAL_K", "Eagle3Head", "EagleHead", "Features", "Head", "LANGUAGES", "LlamaLayer", "MAX_LEN",
    "MedusaHeads", "PASSAGE_TASKS", "RECIPES", "Recipe", "SHIPPED_DATA", "STARTERS", "SpeclabError", "TRAIN_METHODS",
    "TrainResult", "answer_rows", "build_drafter", "chat_frame", "document_prompts", "document_rows",
    "document_tasks", "estimated_acceptance_length", "evaluate", "features_for", "generate_data",
    "held_out_accuracy", "is_hand_written", "load_data", "load_target", "make_batch", "passage_prompts", "recipe",
    "rms_norm", "rope_theta", "rotary", "save", "self_written_prompts", "target_features", "train", "ttt_loss",
    "user_turns", "vocab_subset",
]
