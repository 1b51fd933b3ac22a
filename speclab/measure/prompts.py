"""Prompt sets: the bundled JSONL files, plain prompt lists, and Hugging Face datasets.

Speculative decoding gains depend on the workload (n-gram lookup shines when the answer
repeats the prompt, as in summarising or editing code, and barely helps open chat), so every
lesson runs on a named prompt set with categories. Each source becomes a list of
:class:`Prompt` records; :func:`apply_chat_template` turns them into token ids for vLLM.

Accepted sources:
- a bundled set by name: ``workloads``, ``mtbench_style``, ``specbench_style``, ``heldout``, ``train``
  (``data/prompts/<name>.jsonl``);
- a ``.jsonl`` file in the MT-bench / Spec-Bench shape
  (``{"question_id": 1, "category": "code", "turns": ["..."]}`` per line), or with a
  ``"prompt"`` / ``"text"`` field, or one JSON string per line;
- a ``.json`` file holding a list of strings (or of such objects);
- a ``.txt`` file, one prompt per line;
- a Hugging Face dataset id such as ``philschmid/mt-bench`` (needs the optional
  ``datasets`` package and a network, or ``HF_HUB_OFFLINE=1`` with a cached copy).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..errors import SpeclabError
from ..files import REPO_ROOT
from ..models.provision import hub_reachable

BUNDLED_DIR = REPO_ROOT / "data" / "prompts"
FILE_SUFFIXES = (".jsonl", ".json", ".txt")
TEXT_FIELDS = ("prompt", "text", "question", "instruction")
DEFAULT_CATEGORY = "general"
TURN_MODES = ("first", "each")
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


@dataclass(frozen=True)
class Prompt:
    """One question of a prompt set; ``text`` is the turn this record stands for."""

    id: int | str
    category: str
    text: str
    turns: tuple[str, ...]
    turn: int = 0  # index of ``text`` in ``turns``


def bundled() -> list[str]:
    """Names of the prompt sets shipped in ``data/prompts``."""
    return sorted(p.stem for p in BUNDLED_DIR.glob("*.jsonl"))


def load_prompts(source, category=None, num_prompts: int | None = None, turns: str = "first",
                 split: str = "train", per_category: int | None = None) -> list[Prompt]:
    """Load a prompt set, optionally one or more categories and the first ``num_prompts`` questions.

    ``num_prompts`` takes questions from each (selected) category in turn, so a small run
    still covers every workload; ``per_category`` instead takes the first that many of every
    category (all of a smaller one). ``turns="first"`` gives one record per question
    (its first turn); ``turns="each"`` one record per turn (later turns need the earlier
    answers, see :func:`chat_messages`). ``split`` is used for Hugging Face datasets only.
    """
    if turns not in TURN_MODES:
        raise SpeclabError(f"turns={turns!r} is not supported: use one of {', '.join(TURN_MODES)}")
    for name, value in (("num_prompts", num_prompts), ("per_category", per_category)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise SpeclabError(f"{name} must be a positive whole number or None, not {value!r}")
    if num_prompts is not None and per_category is not None:
        raise SpeclabError("give num_prompts (spread over the categories) or per_category, not both")
    questions = _select_categories(_read_source(source, split), category, source)
    if num_prompts is not None:
        questions = _take_round_robin(questions, num_prompts)
    if per_category is not None:
        questions = _first_of_each_category(questions, per_category)
    if turns == "first":
        return questions
    return [Prompt(q.id, q.category, text, q.turns, n) for q in questions for n, text in enumerate(q.turns)]


def categories(source, split: str = "train") -> list[str]:
    """The categories of a prompt set, in the order they first appear."""
    return list(dict.fromkeys(q.category for q in _read_source(source, split)))


def chat_messages(prompt, answers=None, system: str | None = None) -> list[dict]:
    """OpenAI-style messages for one prompt (a :class:`Prompt` or a plain string).

    A later turn of a multi-turn question needs the model's ``answers`` to the earlier turns,
    which are interleaved as assistant messages.
    """
    messages = [{"role": "system", "content": system}] if system else []
    if isinstance(prompt, str):
        return messages + [{"role": "user", "content": prompt}]
    answers = list(answers or [])
    if len(answers) < prompt.turn:
        raise SpeclabError(
            f"question {prompt.id} turn {prompt.turn + 1} follows earlier answers: "
            f"pass answers= with the model's {prompt.turn} earlier replies, or load with turns='first'"
        )
    for question, answer in zip(prompt.turns[: prompt.turn], answers):
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return messages + [{"role": "user", "content": prompt.text}]


def apply_chat_template(tokenizer, prompts, tokenize: bool = True, system: str | None = None) -> list:
    """Render prompts with the model's chat template, ending in an open assistant turn.

    ``prompts`` holds :class:`Prompt` records, strings, or message lists. With ``tokenize``
    the result is ``[{"prompt_token_ids": [...]}, ...]`` for ``LLM.generate``: the rendered
    text already carries the template's BOS, so it is encoded without special tokens (a
    tokenizer that adds BOS by itself would otherwise put it there twice). Without
    ``tokenize`` the result is the rendered strings.
    """
    if isinstance(tokenizer, (str, Path)):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
    if not getattr(tokenizer, "chat_template", None):
        raise SpeclabError("this tokenizer has no chat template: use an instruct/chat model or pass plain prompt "
                           "strings")
    rendered = [
        tokenizer.apply_chat_template(
            p if isinstance(p, list) else chat_messages(p, system=system), tokenize=False, add_generation_prompt=True
        )
        for p in prompts
    ]
    if not tokenize:
        return rendered
    return [{"prompt_token_ids": tokenizer.encode(text, add_special_tokens=False)} for text in rendered]


# --- reading sources -------------------------------------------------------------------------


def _read_source(source, split: str) -> list[Prompt]:
    name = os.fspath(source)
    path = Path(name).expanduser()
    if path.is_file():
        questions = _read_file(path)
    elif name in bundled():
        questions = _read_file(BUNDLED_DIR / f"{name}.jsonl")
    elif path.is_dir():
        raise SpeclabError(f"{name} is a folder: pass one .jsonl/.json/.txt file inside it")
    elif path.suffix in FILE_SUFFIXES or name.startswith((".", "/", "~")):
        raise SpeclabError(f"prompt file {name} not found: pass an existing .jsonl/.json/.txt file or a bundled set "
                           f"({', '.join(bundled())})")
    elif HUB_ID.fullmatch(name):
        questions = _read_hub(name, split)
    else:
        raise SpeclabError(
            f"unknown prompt set {name!r}: use one of {', '.join(bundled())}, a .jsonl/.json/.txt file, "
            "or a Hugging Face dataset id (owner/name)"
        )
    if not questions:
        raise SpeclabError(f"{name} holds no prompts: add at least one prompt, one per line")
    return questions


def _read_file(path: Path) -> list[Prompt]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise SpeclabError(f"{path} is not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start}): "
                           "save it as UTF-8") from None
    if path.suffix == ".txt":
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return [_from_row(line, n, path) for n, line in enumerate(lines)]
    if path.suffix == ".json":
        rows = _parse_json(text, path, None)
        if not isinstance(rows, list):
            raise SpeclabError(f"{path} must hold a JSON list of prompts (strings or objects with 'turns' or 'prompt')")
        return [_from_row(row, n, path) for n, row in enumerate(rows)]
    if path.suffix == ".jsonl":
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        return [_from_row(_parse_json(line, path, n), i, path) for i, (n, line) in enumerate(lines)]
    raise SpeclabError(f"{path}: unsupported file type {path.suffix!r}: use .jsonl, .json or .txt")


def _parse_json(text: str, path: Path, line: int | None):
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        where = f"{path}:{line}" if line else str(path)
        raise SpeclabError(f"{where}: not valid JSON ({err.msg}): fix that line or use a .txt file") from None


def _from_row(row, index: int, where) -> Prompt:
    """One prompt from a string or a dict row (question shape, or a 'prompt'/'text' field)."""
    if isinstance(row, str):
        row = {"turns": [row]}
    if not isinstance(row, dict):
        raise SpeclabError(f"{where}: entry {index + 1} is a {type(row).__name__}; expected a string or an object")
    turns = row.get("turns")
    if turns is None:
        turns = next((row[f] for f in TEXT_FIELDS if isinstance(row.get(f), str)), None)
    if isinstance(turns, str):
        turns = [turns]
    if not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise SpeclabError(f"{where}: entry {index + 1} has no prompt text: give it 'turns' (a list of strings), "
                           "'prompt' or 'text'")
    qid = row.get("question_id", row.get("id", index + 1))
    return Prompt(id=qid, category=str(row.get("category") or DEFAULT_CATEGORY), text=turns[0], turns=tuple(turns))


def _select_categories(questions: list[Prompt], category, source) -> list[Prompt]:
    if category is None:
        return questions
    wanted = [category] if isinstance(category, str) else list(category)
    available = list(dict.fromkeys(q.category for q in questions))
    unknown = [c for c in wanted if c not in available]
    if unknown:
        raise SpeclabError(f"no category {', '.join(map(repr, unknown))} in {os.fspath(source)}: choose from "
                           f"{', '.join(available)}")
    return [q for q in questions if q.category in wanted]


def _first_of_each_category(questions: list[Prompt], count: int) -> list[Prompt]:
    """The first ``count`` questions of every category, in file order."""
    seen: Counter[str] = Counter()
    kept = []
    for q in questions:
        seen[q.category] += 1
        if seen[q.category] <= count:
            kept.append(q)
    return kept


def _take_round_robin(questions: list[Prompt], count: int) -> list[Prompt]:
    """The first ``count`` questions taken one category at a time, returned in file order."""
    by_category: dict[str, list[int]] = {}
    for position, q in enumerate(questions):
        by_category.setdefault(q.category, []).append(position)
    chosen: list[int] = []
    depth = 0
    while len(chosen) < min(count, len(questions)):
        for positions in by_category.values():
            if depth < len(positions) and len(chosen) < count:
                chosen.append(positions[depth])
        depth += 1
    return [questions[p] for p in sorted(chosen)]


# --- Hugging Face datasets (optional) -------------------------------------------------------


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _read_hub(dataset_id: str, split: str) -> list[Prompt]:
    try:
        import datasets
    except ImportError:
        raise SpeclabError(
            f"loading {dataset_id!r} needs the Hugging Face `datasets` package, which speclab does not install: "
            "pass a local JSONL file or run `pip install datasets`"
        ) from None
    offline = _env_true("HF_HUB_OFFLINE") or _env_true("HF_DATASETS_OFFLINE")
    if not offline and not hub_reachable():
        raise SpeclabError(
            f"cannot reach the Hugging Face Hub to load {dataset_id!r}: pass a local JSONL file, "
            "or set HF_HUB_OFFLINE=1 to use a cached copy"
        )
    try:
        rows = datasets.load_dataset(dataset_id, split=split)
    except Exception as err:  # the library raises many types; the user needs one line
        detail = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise SpeclabError(f"could not load {dataset_id!r} (split {split!r}): {detail}; "
                           "pass a local JSONL file instead") from None
    return [_from_row(dict(row), n, dataset_id) for n, row in enumerate(rows)]
