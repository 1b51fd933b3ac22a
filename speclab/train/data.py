"""Training data by self-distillation: the target (vLLM, CPU or GPU) answers prompts, and the
answers, as token ids, are what a drafter learns to guess. A drafter is good when it guesses what
*this* target says next, so the target's own answers are the training text."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from ..errors import SpeclabError
from ..files import write_atomic
from ..measure import bench
from ..measure.prompts import Prompt, apply_chat_template
from ..models import drafters
from ..models.profiles import DEFAULT_CPU_PROFILE, PROFILES
from ..vllm_layer.engine import open_engine
from ..vllm_layer.logs import import_vllm
from .prompt_builders import CHAT_STARTERS, STARTERS, document_prompts, document_tasks, passage_prompts

DATA_FILE = drafters.SHIPPED_DIR / "selfdistill_train.jsonl"  # greedy answers, made here by generate_data (CPU)

CPU_TINY = PROFILES[DEFAULT_CPU_PROFILE]  # the target the data is written for: SmolLM2-135M-Instruct on the CPU


def generate_data(prompts: str = "train", out: str | Path = DATA_FILE, max_tokens: int = 192,
                  num_prompts: int | None = None, samples: int = 0, temperature: float = 0.8,
                  self_written: int = 0, passages: int = 0, chat_written: int = 0, documents: int = 0,
                  enforce_eager: bool = True, chunk: int = 32, log=lambda m: print(m, flush=True)) -> Path:
    """The target's answers to a prompt set (vLLM on the CPU profile), saved as token ids (JSONL).

    Each prompt gets its greedy answer and ``samples`` more drawn at ``temperature``: sampled
    answers are still the target's own text, and they multiply the data a small prompt set gives.
    ``self_written`` adds that many prompts the target writes itself (:func:`self_written_prompts`),
    each with its greedy answer: the variety a few hundred hand-written prompts lack.
    ``passages`` adds that many prompts built around the greedy answers already made
    (:func:`passage_prompts`): questions, summaries and edits of a text in the prompt.
    ``chat_written`` adds self-written prompts that open like everyday questions (``CHAT_STARTERS``),
    and ``documents`` adds that many documents the target writes plus one summary or question over
    each (:func:`document_rows`). Prompts go to the engine in chunks, so that a slow, shared CPU
    never holds one engine step for minutes (vLLM gives up on a step after
    VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS).
    """
    os.environ.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "1800")
    records, inputs = bench.prompt_inputs(CPU_TINY, prompts, num_prompts=num_prompts)

    with open_engine(CPU_TINY, None, enforce_eager=enforce_eager) as llm:
        tokenizer = llm.get_tokenizer()
        lines = _answer_in_chunks(llm, records, inputs, max_tokens, samples, temperature, chunk, log, "prompts")
        if self_written:
            written = self_written_prompts(llm, tokenizer, self_written)
            lines += _answer_in_chunks(llm, written, apply_chat_template(tokenizer, written), max_tokens, 0,
                                       temperature, chunk, log, "self-written prompts")
        if passages:
            greedy_rows = [row for row in map(json.loads, lines) if not row["sample"]]
            made = passage_prompts(user_turns(tokenizer, greedy_rows), passages)
            lines += _answer_in_chunks(llm, made, apply_chat_template(tokenizer, made), max_tokens, 0,
                                       temperature, chunk, log, "passage prompts")
        if chat_written:
            written = self_written_prompts(llm, tokenizer, chat_written, seed=1, starters=CHAT_STARTERS)
            lines += _answer_in_chunks(llm, written, apply_chat_template(tokenizer, written), max_tokens, 0,
                                       temperature, chunk, log, "self-written chat prompts")
        if documents:
            lines += document_rows(llm, tokenizer, documents, max_tokens, chunk=chunk, log=log)
    return write_atomic(out, "\n".join(lines) + "\n")


def _answer_in_chunks(llm, records, inputs, max_tokens, samples, temperature, chunk, log, what) -> list[str]:
    lines = []
    for start in range(0, len(inputs), chunk):
        lines += answer_rows(llm, records[start:start + chunk], inputs[start:start + chunk], max_tokens,
                             samples, temperature, seed=start)
        log and log(f"answered {min(start + chunk, len(inputs))}/{len(inputs)} {what}")
    return lines


def answer_rows(llm, records, inputs, max_tokens: int, samples: int = 0, temperature: float = 0.8,
                seed: int = 0) -> list[str]:
    """JSONL rows of one engine's answers (greedy first, then ``samples`` sampled ones per prompt).

    Works with any ``vllm.LLM`` holding the target: the CPU profile's, or one on a GPU.
    """
    SamplingParams = import_vllm().SamplingParams  # quietly: its import prints to the log

    runs = [(0, bench.greedy(max_tokens))]
    if samples:
        runs.append((1, SamplingParams(n=samples, temperature=temperature, max_tokens=max_tokens, seed=seed)))
    lines = []
    for first, sampling in runs:
        outputs = llm.generate(inputs, sampling, use_tqdm=False)
        for r, p, o in zip(records, inputs, outputs):
            for j, completion in enumerate(o.outputs):
                lines.append(json.dumps({"id": r.id, "category": r.category, "sample": first + j,
                                         "prompt_ids": p["prompt_token_ids"],
                                         "answer_ids": list(completion.token_ids)}))
    return lines


def self_written_prompts(llm, tokenizer, n: int, max_tokens: int = 224, seed: int = 0,
                         starters=STARTERS) -> list:
    """``n`` user turns written by the target itself (Magpie, Xu et al. 2024), as prompt records.

    The engine gets the chat template up to where a user's words begin (plus a starter from
    ``starters``, in turn) and samples the rest: an instruct model then writes the kind of request
    it was tuned on. Thousands of varied prompts cost one generate call and no dataset; duplicates
    and turns of fewer than four words are dropped, so a few less than ``n`` may come back.
    """
    SamplingParams = import_vllm().SamplingParams  # quietly: its import prints to the log

    pre_query, _ = chat_frame(tokenizer)
    chosen = [starters[i % len(starters)] for i in range(n)]
    inputs = [{"prompt_token_ids": tokenizer.encode(pre_query + start, add_special_tokens=False)}
              for _, start in chosen]
    # one seed per request: with a single seed, identical inputs would give identical turns
    sampling = [SamplingParams(temperature=1.0, top_p=0.95, max_tokens=max_tokens, seed=seed * n + i) for i in range(n)]
    outputs = llm.generate(inputs, sampling, use_tqdm=False)
    seen, prompts = set(), []
    for i, ((category, start), o) in enumerate(zip(chosen, outputs)):
        turn = (start + o.outputs[0].text).strip()
        if len(turn.split()) < 4 or turn in seen:
            continue
        seen.add(turn)
        prompts.append(Prompt(f"self-{seed}-{i}", category, turn, (turn,)))
    return prompts


# Tasks over a passage (the target's own earlier answers): what copying workloads look like.
def document_rows(llm, tokenizer, n: int, max_tokens: int, seed: int = 0, chunk: int = 256, log=None) -> list[str]:
    """Data rows: the target writes ``n`` documents, then answers one summary or question over each.

    Both answers are rows (the document is the target's own text too). Each document becomes the
    passage of a task from ``DOCUMENT_TASKS`` (held-out summaries and RAG copy from such passages).
    """

    asked = document_prompts(n, seed)
    rows = [json.loads(x) for x in _answer_in_chunks(llm, asked, apply_chat_template(tokenizer, asked), max_tokens,
                                                     0, 0.8, chunk, log, "document requests")]
    made = document_tasks(asked, [tokenizer.decode(r["answer_ids"], skip_special_tokens=True) for r in rows], seed)
    return [json.dumps(dict(r, category="document")) for r in rows] + _answer_in_chunks(
        llm, made, apply_chat_template(tokenizer, made), max_tokens, 0, 0.8, chunk, log, "document tasks")


def chat_frame(tokenizer) -> tuple[str, str]:
    """The chat template's text before and after a user's turn (up to where the answer begins)."""
    marker = "\x00speclab\x00"
    before, after = tokenizer.apply_chat_template([{"role": "user", "content": marker}], tokenize=False,
                                                  add_generation_prompt=True).split(marker)
    return before, after


def user_turns(tokenizer, rows: list[dict]) -> list[tuple[str, str]]:
    """(user turn, answer) texts of data rows: the turn cut out of the chat-templated prompt."""
    pre, post = chat_frame(tokenizer)
    pairs = []
    for r in rows:
        prompt = tokenizer.decode(r["prompt_ids"])
        if prompt.startswith(pre) and prompt.endswith(post):
            pairs.append((prompt[len(pre):len(prompt) - len(post)], tokenizer.decode(r["answer_ids"],
                                                                                     skip_special_tokens=True)))
    return pairs


def is_hand_written(prompt_id) -> bool:
    """Rows from data/prompts/train.jsonl, not from self_written_prompts, passage_prompts or document_rows."""
    return not str(prompt_id).startswith(("self-", "passage-", "document-"))


def load_data(path: str | Path = DATA_FILE, num_sequences: int | None = None) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise SpeclabError(f"no training data at {path}: run speclab.train.generate_data() (needs vLLM) first")
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return rows[:num_sequences] if num_sequences else rows
