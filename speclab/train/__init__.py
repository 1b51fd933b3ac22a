"""Train drafters for SmolLM2-135M-Instruct by self-distillation, in plain torch (CPU or GPU).

Three steps, each a function:

1. ``generate_data``: the target answers prompts with vLLM: the hand-written ``train`` set,
   thousands it writes itself (``self_written_prompts``, Magpie-style), prompts built around its
   own answers (``passage_prompts``: RAG, summaries, code edits) and documents it writes with a
   summary or question over each (``document_rows``). A drafter is good when it guesses
   what *this* target says next, so the target's own answers are the training text.
2. ``target_features``: one forward pass of the target (transformers, float32) over every
   prompt + answer gives the hidden states the heads read (the last, normed one for EAGLE and
   Medusa; three intermediate ones for EAGLE-3) and the label at every place: the token the
   target itself would pick next (its argmax), which is what greedy verification accepts.
3. ``train``: fits one drafter (``draft_model``, ``eagle``, ``eagle3``, ``medusa``) and saves it in
   the layout vLLM loads (see :mod:`speclab.drafters`), with a ``card.json``.

EAGLE and EAGLE-3 are trained the way vLLM runs them: at draft step j the head sees its own
previous output, and its attention reads the keys of the first pass (made from the target's
features) plus its own earlier steps at the same place ("training-time test"). Every loss is
computed over the tokens that occur in the training text only (a vocabulary subset), which makes
the lm_head product ~6x cheaper on a CPU; the lm_head itself is the target's, frozen.

``python -m speclab.train --method eagle`` trains with the shipped recipe (``recipe``) and saves; ``--evaluate`` then
measures acceptance with vLLM on the held-out prompts and writes it into the card.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import bench, configs, drafters
from .data import Prompt, apply_chat_template
from .engine import exit_on_sigterm, open_engine
from .envcheck import device_name
from .errors import SpeclabError
from .logs import import_vllm
from .models import atomic_folder, fetch_smollm2
from .report import write_atomic, write_json

DATA_FILE = drafters.SHIPPED_DIR / "selfdistill_train.jsonl"  # greedy answers, made here by generate_data (CPU)
# What the shipped drafters were trained on (vLLM 0.26.0 on H200s, bf16), in the order of the file:
# 1 greedy + 8 sampled (T=0.8) answers per train prompt (2,682 rows, made by answer_rows, up to 256 tokens),
# 11,991 prompts the target wrote itself with their greedy answers (self_written_prompts, seed 0, up to 256),
# 4,000 prompts built around those greedy answers (passage_prompts, seed 0), answered greedily up to 192 tokens;
# then (18,673 rows above) 2,958 chat questions it wrote itself (CHAT_STARTERS, seed 1) and 3,000 documents with
# a summary or question over the 435 that do not loop (document_rows, seed 0), all greedy up to 256 tokens.
SHIPPED_DATA = drafters.SHIPPED_DIR / "selfdistill_gpu.jsonl.gz"
# Rows of SHIPPED_DATA each shipped drafter saw (None: all 25,066); the draft model and Medusa predate the rest.
SHIPPED_SEQUENCES = {"eagle": None, "eagle3": None, "draft_model": 18673, "medusa": 18673}
DEFAULT_BATCH = 32
TRAIN_METHODS = ("eagle", "eagle3", "draft_model", "medusa")
DEFAULT_STEPS = {"eagle": 9000, "eagle3": 8400, "draft_model": 7000, "medusa": 6000}  # length of the lr schedule
# Where the shipped runs stopped (None: they ran their whole schedule). The step counts are 11 to 13 passes over
# the training rows; each run took 2-7 minutes on an H200. On the first 18,673 rows EAGLE-3's 8,400 steps
# (held-out 2.15 in vLLM) beat 4,201 (2.10), and EAGLE's 6,833 of 9,000 steps beat a 6,000-step schedule.
SHIPPED_STOP_AFTER = {"eagle": None, "eagle3": None, "draft_model": None, "medusa": None}
DEFAULT_LR = {"eagle": 1e-3, "eagle3": 1e-3, "draft_model": 3e-4, "medusa": 1e-3}
EAGLE3_DRAFT_VOCAB = 8192  # the shipped EAGLE-3 head's own lm_head: the 8192 most frequent tokens of the data
# (4096 left 12% of held-out answer tokens undraftable, 8192 leaves 7%). Its rows are the target's: data/drafters
# keeps only d2t, and drafters.loadable rebuilds the matrix.
MEDUSA_LAYERS = 8  # residual blocks per Medusa head (vLLM's num_hidden_layers): 1 -> 8 took held-out 1.40 -> 1.46
# How many times each answer to a hand-written train prompt is seen per pass: they resemble the held-out
# prompts, and the self-written and passage prompts outnumber them six to one. At 3, two-block Medusa heads
# scored 1.450 on the held-out prompts against 1.453 at 1 (offline, same schedule), so the recipe keeps 1.
HAND_WRITTEN_REPEATS = {"eagle": 1, "eagle3": 1, "draft_model": 1, "medusa": 1}
TTT_STEPS = 3  # draft steps unrolled in training (k=3 at evaluation)
DRAFT_INIT_LAYERS = (0, 29)  # target layers that initialise the 2-layer draft model
MAX_LEN = 640


def recipe(method: str) -> dict:
    """The keyword arguments of :func:`train` that made the shipped drafter for ``method``."""
    return {"steps": DEFAULT_STEPS[method], "stop_after": SHIPPED_STOP_AFTER[method], "batch_size": DEFAULT_BATCH,
            "lr": DEFAULT_LR[method], "data": SHIPPED_DATA, "num_sequences": SHIPPED_SEQUENCES[method],
            "val_fraction": 0.1,
            "draft_vocab": EAGLE3_DRAFT_VOCAB if method == "eagle3" else None,
            "medusa_layers": MEDUSA_LAYERS if method == "medusa" else None,
            "hand_written_repeats": HAND_WRITTEN_REPEATS[method]}


# ---------------------------------------------------------------- 1. data: the target answers

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
    import os

    os.environ.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "1800")
    records, inputs = bench.prompt_inputs("cpu-tiny", prompts, num_prompts=num_prompts)

    with open_engine("cpu-tiny", None, enforce_eager=enforce_eager) as llm:
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


# Openings of a user turn that steer the target towards each workload; "" lets it write anything.
STARTERS = (("chat", ""), ("chat", ""), ("chat", ""), ("code", "Write a Python function that"),
            ("code", "Fix the bug in this code:\n\n```python\n"),
            ("summarisation", "Summarise the following passage in three sentences.\n\n"),
            ("summarisation", "Summarise this email in three bullet points.\n\nSubject:"), ("rag", "Context:\n"),
            ("translation", "Translate into French: \""), ("translation", "Translate into German: \""),
            ("translation", "Translate into Spanish: \""), ("maths", "Solve step by step: "),
            ("maths", "A shop sells"))
# Openings of everyday questions: with "" alone the target mostly writes tasks, rarely a chat question.
CHAT_STARTERS = (("chat", "How do I"), ("chat", "What are some"), ("chat", "Why do"), ("chat", "Which"),
                 ("chat", "Can you suggest"), ("chat", "What is the best way to"), ("chat", "Is it better to"),
                 ("chat", "How can I"))


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
PASSAGE_TASKS = (
    ("rag", "Context:\n{passage}\n\nQuestion: {question}\n\nAnswer using only the context above, and quote the "
            "sentences that answer the question."),
    ("rag", "Read the context and answer the question in its own words where you can.\n\nContext:\n{passage}\n\n"
            "Question: {question}"),
    ("rag", "Context:\n{passage}\n\nUsing only the context, answer: {question}"),
    ("summarisation", "Summarise the following text in two sentences.\n\n{passage}"),
    ("summarisation", "List the three main points of this passage as bullet points.\n\n{passage}"),
    ("summarisation", "Write a short summary of the text below for a newsletter.\n\n{passage}"),
    ("summarisation", "{passage}\n\nSummarise the text above in about 40 words."),
    ("translation", "Translate into {language}:\n\n{sentences}"),
    ("code", "Add type hints and a docstring to this code.\n\n```python\n{code}\n```"),
    ("code", "Rewrite this code with clearer variable names, and keep what it does.\n\n```python\n{code}\n```"),
)
LANGUAGES = ("French", "German", "Spanish", "Italian")


def passage_prompts(pairs, n: int, seed: int = 0, min_words: int = 60, max_words: int = 160,
                    tasks=PASSAGE_TASKS) -> list:
    """``n`` prompts built around passages the target wrote itself (its earlier answers).

    ``pairs`` are (user turn, answer) texts. A prose answer becomes the context of a question (the
    turn that produced it, which it answers), a text to summarise or sentences to translate; a Python
    block in an answer becomes code to edit. Held-out RAG and summaries copy from a passage in the
    prompt, and self-written prompts rarely carry one: these do, so a drafter learns to copy.
    """
    import random
    import re

    prose, code = [], []
    for question, answer in pairs:
        block = re.search(r"```(?:python|py)?\n(.*?)```", answer, re.S)
        if block and 3 <= block.group(1).count("\n") <= 30:
            code.append(block.group(1).rstrip())
            continue
        words = answer.split()
        if "```" in answer or len(words) < min_words or len(set(words)) < 0.45 * len(words):
            continue  # too short, code, or the small model repeating itself
        text = " ".join(words[:max_words]) if len(words) > max_words else answer.strip()
        end = max(text.rfind(". "), text.rfind(".\n"), text.rfind(".") if text.endswith(".") else -1)
        passage = (text[:end + 1] if end > 0 else text).strip()
        sentences = re.split(r"(?<=[.!?])\s+", passage)
        prose.append((question.strip(), passage, " ".join(sentences[:2])))
    rng = random.Random(seed)
    out = []
    for i in range(n):
        category, template = tasks[i % len(tasks)]
        if category == "code":
            if not code:
                continue
            text = template.format(code=rng.choice(code))
        else:
            if not prose:
                continue
            question, passage, first = rng.choice(prose)
            if category == "rag" and len(question.split()) > 40:
                question = "What does the text say about its main subject?"
            text = template.format(passage=passage, question=question, sentences=first,
                                   language=LANGUAGES[i % len(LANGUAGES)])
        out.append(Prompt(f"passage-{seed}-{i}", category, text, (text,)))
    return out


# Documents of the kinds that summaries and RAG prompts carry: (kind, request, question, topic groups).
DOCUMENT_KINDS = (
    ("email", "Write an email to your team about {topic}. Include dates, names and what each person should do.",
     "What does the email ask the team to do?", ("work", "places")),
    ("notice", "Write a notice for customers about {topic}. Say what happens, when, and what they should do.",
     "What should customers do, and by when?", ("work", "places")),
    ("terms page", "Write the membership terms for {topic}, with prices, opening times and rules.",
     "What do the terms say about prices and times?", ("places",)),
    ("changelog", "Write release notes for version 2.3 of {topic}.", "What is new in this version?",
     ("software",)),
    ("history", "Write a short history of {topic} in two paragraphs, with dates and names.",
     "What were the main steps in this history?", ("knowledge",)),
    ("explainer", "Explain {topic} to a curious teenager in two paragraphs.", "How does the text explain it?",
     ("knowledge",)),
    ("meeting record", "Write the notes of a team meeting about {topic}: decisions, open questions and next steps.",
     "What was decided at the meeting?", ("work", "software")),
    ("guide", "Write a short visitor guide to {topic}: what to see, tickets and how to get there.",
     "How much are tickets and when is it open?", ("places",)),
    ("report", "Write a short news report about {topic}.", "What happened, according to the report?",
     ("work", "places")),
    ("policy", "Write a workplace policy about {topic}, with the reason for each rule.",
     "What are the rules, and why?", ("work",)),
)
DOCUMENT_TOPICS = {
    "work": ("a new parking arrangement", "moving to a new office", "changes to the opening hours",
             "a water leak in the building", "remote working", "a new customer support process",
             "the staff canteen", "a power cut on Saturday", "a price increase", "expenses and travel",
             "holiday requests", "a printer that keeps failing", "training for new staff", "a fire drill"),
    "places": ("a community garden", "the town library", "a local swimming pool", "a museum of natural history",
               "a summer sports camp", "a food festival", "a city marathon", "a science fair", "a cooking school",
               "a climbing centre", "a zoo", "the old lighthouse", "a night bus service", "a bicycle sharing scheme"),
    "software": ("a photo sharing app", "an online booking system", "a mobile banking app", "a note-taking app",
                 "a music player", "a team chat tool", "a fitness tracker app", "an email client"),
    "knowledge": ("the telephone", "vaccines", "the water cycle", "volcanoes", "bees and pollination",
                  "the printing press", "railways", "the bicycle", "tides", "the internet", "coffee", "glass",
                  "photosynthesis", "earthquakes", "paper money", "lighthouses"),
}
DOCUMENT_TASKS = (
    ("summarisation", "Summarise the following text in three sentences.\n\n{passage}"),
    ("rag", "Context:\n{passage}\n\nQuestion: {question}"),
    ("summarisation", "Summarise this {kind} in three bullet points.\n\n{passage}"),
    ("rag", "Answer the question using only the context.\n\nContext:\n{passage}\n\nQuestion: {question}"),
    ("summarisation", "Write a short summary of this {kind} for a newsletter.\n\n{passage}"),
    ("summarisation", "Summarise the {kind} below in a short paragraph.\n\n{passage}"),
)


def document_prompts(n: int, seed: int = 0) -> list:
    """``n`` requests for a document (an email, a notice, terms, a short history...) on a topic.

    Held-out summaries and RAG prompts carry documents of these kinds, and the target's answers
    to other prompts are rarely one; what it writes here becomes the passage of a later prompt.
    The question that goes with each kind is kept in ``turns[1]`` for :func:`document_rows`.
    """
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind, request, question, groups = DOCUMENT_KINDS[i % len(DOCUMENT_KINDS)]
        text = request.format(topic=rng.choice([t for g in groups for t in DOCUMENT_TOPICS[g]]))
        out.append(Prompt(f"document-{seed}-{i}", kind, text, (text, question)))
    return out


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


def document_tasks(asked: list, answers: list[str], seed: int = 0) -> list:
    """One prompt over each written document, in turn from ``DOCUMENT_TASKS``; documents that loop are skipped.

    Greedy decoding makes a 135M model repeat itself after a paragraph or two: :func:`passage_prompts`
    drops a text whose words are less than 45% distinct (2,565 of 3,000 documents in the shipped data).
    """

    made = []
    for i, (p, answer) in enumerate(zip(asked, answers)):
        category, template = DOCUMENT_TASKS[i % len(DOCUMENT_TASKS)]
        for task in passage_prompts([(p.turns[1], answer)], 1, seed=i, min_words=40, max_words=260,
                                    tasks=((category, template.replace("{kind}", p.category)),)):
            made.append(Prompt(f"document-task-{seed}-{i}", task.category, task.text, task.turns))
    return made


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


# ---------------------------------------------------------------- 2. the target's hidden states

@dataclass
class Sequence:
    ids: "torch.Tensor"  # [L] prompt + answer
    prompt_len: int
    final: "torch.Tensor | None"  # [L, h] last hidden state after the final norm (what lm_head reads)
    aux: "torch.Tensor | None" = None  # [L, 3h] outputs of the EAGLE-3 layers, concatenated
    prompt_id: str = ""  # several answers to one prompt are held back together
    sample: int = 0  # 0: the greedy answer (what a greedy run must predict); 1..n: sampled ones
    greedy: "torch.Tensor | None" = None  # [L] the target's argmax after each place: the token greedy verification accepts


def load_target(device: str = "cpu"):
    import torch
    from transformers import AutoModelForCausalLM

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" bars would land in the lesson's output
    model = AutoModelForCausalLM.from_pretrained(str(fetch_smollm2(quiet=True)), dtype=torch.float32)
    return model.to(device).eval()


def features_for(method: str, rows: list[dict], model=None, **kw) -> list[Sequence]:
    """:func:`target_features` with what ``method`` reads: EAGLE-3 the three fused layers only (its
    own output feeds its next step), the others the last hidden state; this keeps the full data's
    features within a 24 GB machine (about 13.6 GB for EAGLE-3, 4.5 GB for the others)."""
    eagle3 = method == "eagle3"
    return target_features(rows, model, aux_layers=drafters.EAGLE3_AUX_LAYERS if eagle3 else (),
                           keep_final=not eagle3, **kw)


def target_features(rows: list[dict], model=None, aux_layers=drafters.EAGLE3_AUX_LAYERS,
                    max_len: int = MAX_LEN, batch_size: int = 16, keep_final: bool = True,
                    device: str = "cpu") -> list[Sequence]:
    """Run the target over each prompt + answer; keep the hidden states the drafters read and the
    target's own greedy choice after every place (the label: under greedy verification a draft
    token is accepted exactly when it is that choice, whatever token the text has there).

    Sequences of similar length go through together, right-padded: causal attention never lets a
    real token see the padding after it.
    """
    import torch

    model = model or load_target(device)
    device = next(model.parameters()).device
    ids_of = [torch.tensor((r["prompt_ids"] + r["answer_ids"])[:max_len]) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: len(ids_of[i]))
    out = [None] * len(rows)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            lengths = [len(ids_of[i]) for i in chunk]
            ids = torch.zeros(len(chunk), max(lengths), dtype=torch.long)
            mask = torch.zeros_like(ids)
            for b, i in enumerate(chunk):
                ids[b, :lengths[b]], mask[b, :lengths[b]] = ids_of[i], 1
            res = model.model(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True)
            states = res.hidden_states  # [embeddings, after layer 1, ..., after the final norm]
            for b, i in enumerate(chunk):
                n, row = lengths[b], rows[i]
                final = res.last_hidden_state[b, :n]
                aux = torch.cat([states[j][b, :n] for j in aux_layers], dim=-1) if aux_layers else None
                out[i] = Sequence(ids[b, :n].to(device), len(row["prompt_ids"]),
                                  final.to(torch.bfloat16) if keep_final else None,
                                  aux.to(torch.bfloat16) if aux is not None else None, str(row.get("id", "")),
                                  int(row.get("sample", 0)), model.lm_head(final).argmax(-1))
    return out


def vocab_subset(seqs: list[Sequence], limit: int | None = None):
    """Token ids that occur in the data, most frequent first (``limit`` keeps the top ones)."""
    import torch

    counts = torch.bincount(torch.cat([t.cpu() for s in seqs for t in (s.ids, s.greedy) if t is not None]), minlength=1)
    order = torch.argsort(counts, descending=True)
    order = order[counts[order] > 0]
    return order[:limit] if limit else order


# ---------------------------------------------------------------- pieces of a Llama layer

def rms_norm(x, weight, eps: float = 1e-5):
    import torch

    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)) * weight


def rotary(x, positions, theta: float):
    """Rotate-half rotary embedding (vLLM's neox style for Llama). x: [..., T, d]."""
    import torch

    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    ang = positions.float()[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    half = d // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


class Layer:
    """Parameters of one Llama decoder layer as a dict of tensors (Hugging Face names)."""

    def __init__(self, cfg: dict, qkv_in: int | None = None):
        import torch

        h, inter, q, kv = drafters._dims(cfg)
        self.heads, self.kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.head_dim, self.theta = q // self.heads, _rope_theta(cfg)
        qkv_in = qkv_in or h
        shapes = {"self_attn.q_proj.weight": (q, qkv_in), "self_attn.k_proj.weight": (kv, qkv_in),
                  "self_attn.v_proj.weight": (kv, qkv_in), "self_attn.o_proj.weight": (h, q),
                  "mlp.gate_proj.weight": (inter, h), "mlp.up_proj.weight": (inter, h),
                  "mlp.down_proj.weight": (h, inter)}
        self.p = {n: torch.nn.Parameter(torch.randn(*s) * 0.02) for n, s in shapes.items()}
        self.p["post_attention_layernorm.weight"] = torch.nn.Parameter(torch.ones(h))

    def qkv(self, x, positions):
        """x: [B, T, in] -> q [B, H, T, d], k, v [B, H, T, d] (kv heads repeated)."""
        B, T, _ = x.shape
        q = (x @ self.p["self_attn.q_proj.weight"].T).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = (x @ self.p["self_attn.k_proj.weight"].T).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = (x @ self.p["self_attn.v_proj.weight"].T).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotary(q, positions, self.theta), rotary(k, positions, self.theta)
        rep = self.heads // self.kv_heads
        return q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)

    def attend(self, q, keys, values):
        """Causal attention over the first pass's keys plus this place's own earlier steps.

        ``keys[0]``/``values[0]`` come from draft step 0 (all positions, causal); ``keys[m]``
        (m >= 1) from step m at the same place only: what vLLM's KV cache holds at step j.
        """
        import torch

        B, H, T, d = q.shape
        scale = 1.0 / math.sqrt(d)
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        s0 = (q @ keys[0].transpose(-1, -2)) * scale
        s0 = s0.masked_fill(~causal, float("-inf"))
        diag = [(q * k).sum(-1, keepdim=True) * scale for k in keys[1:]]
        p = torch.softmax(torch.cat([s0, *diag], -1), -1)
        out = p[..., :T] @ values[0]
        for m, v in enumerate(values[1:]):
            out = out + p[..., T + m:T + m + 1] * v
        return out.transpose(1, 2).reshape(B, T, H * d) @ self.p["self_attn.o_proj.weight"].T

    def mlp(self, x):
        import torch.nn.functional as F

        return (F.silu(x @ self.p["mlp.gate_proj.weight"].T) * (x @ self.p["mlp.up_proj.weight"].T)) @ \
            self.p["mlp.down_proj.weight"].T

    def load(self, tensors: dict, prefix: str):
        import torch

        with torch.no_grad():
            for name, param in self.p.items():
                if f"{prefix}.{name}" in tensors:
                    param.copy_(tensors[f"{prefix}.{name}"].float())

    def export(self, prefix: str) -> dict:
        return {f"{prefix}.{n}": p.detach() for n, p in self.p.items()}


def _rope_theta(cfg: dict) -> float:
    return float((cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta") or 10000.0)


# ---------------------------------------------------------------- 3. the drafters

class Head:
    """Common parts: the target's frozen embedding/lm_head restricted to a vocabulary subset."""

    def __init__(self, embed, subset):
        self.embed, self.subset = embed, subset  # embed: [V, h] float32, frozen
        self.lm_rows = embed[subset]  # [V_sub, h]
        import torch

        self.lookup = torch.full((embed.shape[0],), -100, dtype=torch.long)
        self.lookup[subset] = torch.arange(len(subset))

    def to(self, device):
        """Move the frozen matrices and the trainable parameters (in place) to ``device``."""
        self.embed, self.lm_rows, self.lookup = self.embed.to(device), self.lm_rows.to(device), self.lookup.to(device)
        for p in self.parameters():
            p.data = p.data.to(device)

    def ce(self, hidden, labels, mask):
        """Cross-entropy and top-1 accuracy over the masked places (zero when there are none)."""
        import torch.nn.functional as F

        if not bool(mask.any()):  # e.g. a prompt longer than max_len: no answer token to learn here
            return hidden.sum() * 0.0, 0.0
        logits = hidden[mask] @ self.lm_rows.T
        target = self.lookup[labels[mask]]
        loss = F.cross_entropy(logits.float(), target, ignore_index=-100)
        acc = (logits.argmax(-1) == target).float().mean()
        return loss, acc


class EagleHead(Head):
    """EAGLE (vLLM's llama_eagle): fc([embedding; feature]) -> one decoder layer (no input norm)."""

    method = "eagle"

    def __init__(self, cfg, embed, subset):
        super().__init__(embed, subset)
        import torch

        h = cfg["hidden_size"]
        self.cfg, self.eps = cfg, cfg["rms_norm_eps"]
        self.layer = Layer(cfg)
        self.fc = torch.nn.Parameter(torch.randn(h, 2 * h) * (1.0 / math.sqrt(2 * h)))
        with torch.no_grad():  # start as "pass the feature through": fc = [0 | I]
            self.fc.zero_()
            self.fc[:, h:] = torch.eye(h)

    def parameters(self):
        return [self.fc, *self.layer.p.values()]

    def inputs(self, seq_batch):
        return seq_batch["final"].float()

    def step(self, tokens, hidden, positions, keys, values):
        """One draft step over all places: returns (logit feature, next hidden, k, v)."""
        x = torch_cat([self.embed[tokens], hidden]) @ self.fc.T
        q, k, v = self.layer.qkv(x, positions)
        attn = self.layer.attend(q, keys + [k], values + [v])
        residual = x + attn
        out = residual + self.layer.mlp(rms_norm(residual, self.layer.p["post_attention_layernorm.weight"], self.eps))
        return out, out, k, v

    def extra_loss(self, out, target_final, mask):
        import torch.nn.functional as F

        if not bool(mask.any()):
            return None
        return F.smooth_l1_loss(out[mask], target_final[mask].float())

    def export(self):
        t = self.layer.export("layers.0")
        t["fc.weight"] = self.fc.detach()
        return t

    def config(self):
        return drafters.llama_config(1)


class Eagle3Head(Head):
    """EAGLE-3 (vLLM's llama_eagle3): fc fuses three target layers; the layer attends over
    [norm(embedding); norm(feature)]; the final norm feeds the lm_head."""

    method = "eagle3"

    def __init__(self, cfg, embed, subset, draft_vocab: int | None = None):
        """``draft_vocab``: own lm_head over the N most frequent tokens of the data (as the published
        heads do, 32k of Llama-3's 128k) instead of the target's full one; a draft step gets cheaper,
        and the tokens left out can never be drafted."""
        import torch

        if draft_vocab:
            subset = torch.sort(subset[:draft_vocab]).values  # ascending: draft id i -> target id subset[i]
        super().__init__(embed, subset)
        self.draft_vocab = draft_vocab

        h, n = cfg["hidden_size"], len(drafters.EAGLE3_AUX_LAYERS)
        self.cfg, self.eps = cfg, cfg["rms_norm_eps"]
        self.layer = Layer(cfg, qkv_in=2 * h)
        self.fc = torch.nn.Parameter(torch.randn(h, n * h) * (1.0 / math.sqrt(n * h)))
        self.norms = {k: torch.nn.Parameter(torch.ones(h)) for k in ("input_layernorm", "hidden_norm", "norm")}

    def parameters(self):
        return [self.fc, *self.layer.p.values(), *self.norms.values()]

    def inputs(self, seq_batch):
        return seq_batch["aux"].float() @ self.fc.T

    def step(self, tokens, hidden, positions, keys, values):
        e = rms_norm(self.embed[tokens], self.norms["input_layernorm"], self.eps)
        residual = hidden
        x = torch_cat([e, rms_norm(hidden, self.norms["hidden_norm"], self.eps)])
        q, k, v = self.layer.qkv(x, positions)
        residual = residual + self.layer.attend(q, keys + [k], values + [v])
        residual = residual + self.layer.mlp(rms_norm(residual, self.layer.p["post_attention_layernorm.weight"], self.eps))
        return rms_norm(residual, self.norms["norm"], self.eps), residual, k, v

    def extra_loss(self, out, target_final, mask):
        return None

    def export(self):
        t = self.layer.export("midlayer")
        t.update({f"midlayer.{n}.weight": self.norms[n].detach() for n in ("input_layernorm", "hidden_norm")})
        t["norm.weight"] = self.norms["norm"].detach()
        t["fc.weight"] = self.fc.detach()
        if self.draft_vocab:  # vLLM maps draft id i to target id i + d2t[i]
            import torch

            t["lm_head.weight"] = self.lm_rows.detach()
            t["d2t"] = (self.subset - torch.arange(len(self.subset), device=self.subset.device)).long()
        return t

    def config(self):
        return drafters.eagle3_config(draft_vocab_size=len(self.subset) if self.draft_vocab else None)


def torch_cat(parts):
    import torch

    return torch.cat(parts, dim=-1)


def ttt_loss(head, batch, steps: int = TTT_STEPS):
    """Unrolled draft steps; step j at place i reads token i+1+j and predicts token i+2+j."""
    import torch

    ids, lengths, prompt_lens = batch["ids"], batch["lengths"], batch["prompt_lens"]
    B, L = ids.shape
    hidden = head.inputs(batch)
    keys, values, total, accs = [], [], 0.0, []
    for j in range(steps):
        T = L - 2 - j
        if T <= 0:
            break
        place = torch.arange(T, device=ids.device)
        tokens = ids[:, 1 + j:1 + j + T]
        labels = batch["greedy"][:, 1 + j:1 + j + T]  # what the target picks after token i+1+j
        mask = (place[None, :] + 2 + j < lengths[:, None]) & (place[None, :] + 2 + j >= prompt_lens[:, None])
        out, nxt, k, v = head.step(tokens, hidden[:, :T], place + j, [kk[..., :T, :] for kk in keys],
                                   [vv[..., :T, :] for vv in values])
        if k is not None and j == 0:
            keys, values = [k], [v]
        elif k is not None:
            keys, values = keys + [k], values + [v]
        loss, acc = head.ce(out, labels, mask)
        extra = head.extra_loss(out, batch["final"][:, 1 + j:1 + j + T], mask) if "final" in batch else None
        step_loss = loss + (extra if extra is not None else 0.0)
        total = total + step_loss * (0.8 ** j)
        accs.append(float(acc))
        hidden = nxt
    return total, accs


class MedusaHeads(Head):
    """Medusa (vLLM's medusa.py): head m is ``num_layers`` residual blocks x + SiLU(W x) on the
    target's last hidden state, then the (shared, truncated) lm_head; head m guesses the token
    m+2 places ahead."""

    method = "medusa"

    def __init__(self, cfg, embed, subset, num_heads: int = drafters.MEDUSA_HEADS, num_layers: int = 1):
        super().__init__(embed, subset)
        import torch

        h = cfg["hidden_size"]
        # zero: every block starts as the identity, so each head starts as the next-token head
        self.w = [[torch.nn.Parameter(torch.zeros(h, h)) for _ in range(num_layers)] for _ in range(num_heads)]

    def parameters(self):
        return [w for head in self.w for w in head]

    def loss(self, batch):
        import torch
        import torch.nn.functional as F

        ids, final = batch["ids"], batch["final"].float()
        L = ids.shape[1]
        total, accs = 0.0, []
        for m, head in enumerate(self.w):
            T = L - 2 - m
            if T <= 0:
                break
            place = torch.arange(T, device=ids.device)
            mask = (place[None, :] + 2 + m < batch["lengths"][:, None]) & \
                   (place[None, :] + 2 + m >= batch["prompt_lens"][:, None])
            out = final[:, :T][mask]  # only the places with a label: the blocks act on each place alone
            for w in head:
                out = out + F.silu(out @ w.T)
            labels = batch["greedy"][:, 1 + m:1 + m + T][mask]
            loss, acc = self.ce(out, labels, torch.ones_like(labels, dtype=torch.bool))
            total, accs = total + loss, accs + [float(acc)]
        return total, accs

    def export(self):
        # the lm_head is the target's: drafters.loadable() adds it back when vLLM needs the folder
        return {f"blocks.{m}.layers.{j}.weight": w.detach() for m, head in enumerate(self.w) for j, w in enumerate(head)}

    def config(self):
        return drafters.medusa_config(len(self.w), len(self.w[0]))


class DraftModel(Head):
    """A 2-layer Llama with the target's width and its frozen, tied embedding (vLLM draft_model)."""

    method = "draft_model"

    def __init__(self, cfg, embed, subset, init: dict | None = None):
        super().__init__(embed, subset)
        import torch

        self.cfg, self.eps = cfg, cfg["rms_norm_eps"]
        self.layers = [Layer(cfg) for _ in range(drafters.DRAFT_MODEL_LAYERS)]
        h = cfg["hidden_size"]
        for layer in self.layers:
            layer.p["input_layernorm.weight"] = torch.nn.Parameter(torch.ones(h))
        self.norm = torch.nn.Parameter(torch.ones(h))
        if init:
            for layer, src in zip(self.layers, DRAFT_INIT_LAYERS):
                layer.load(init, f"model.layers.{src}")
            with torch.no_grad():
                self.norm.copy_(init["model.norm.weight"].float())

    def parameters(self):
        return [self.norm, *(p for layer in self.layers for p in layer.p.values())]

    def loss(self, batch):
        import torch

        ids = batch["ids"]
        B, L = ids.shape
        T = L - 1
        place = torch.arange(T, device=ids.device)
        x = self.embed[ids[:, :T]]
        for layer in self.layers:
            q, k, v = layer.qkv(rms_norm(x, layer.p["input_layernorm.weight"], self.eps), place)
            x = x + layer.attend(q, [k], [v])
            x = x + layer.mlp(rms_norm(x, layer.p["post_attention_layernorm.weight"], self.eps))
        out = rms_norm(x, self.norm, self.eps)
        mask = (place[None, :] + 1 < batch["lengths"][:, None]) & (place[None, :] + 1 >= batch["prompt_lens"][:, None])
        loss, acc = self.ce(out, batch["greedy"][:, :T], mask)
        return loss, [float(acc)]

    def export(self):
        t = {}
        for i, layer in enumerate(self.layers):
            t.update(layer.export(f"model.layers.{i}"))
        t["model.norm.weight"] = self.norm.detach()
        return t

    def config(self):
        return drafters.llama_config(drafters.DRAFT_MODEL_LAYERS)


# ---------------------------------------------------------------- the training loop

@dataclass
class TrainResult:
    method: str
    folder: Path
    steps: int
    seconds: float
    losses: list[float] = field(default_factory=list)
    accuracies: list[list[float]] = field(default_factory=list)  # per logged step, per draft position
    validation: list[tuple] = field(default_factory=list)  # (step, loss, top-1 per position)
    best_val_loss: float = float("inf")
    best_val_length: float = 0.0  # acceptance length estimated from held-back top-1 (what selection maximises)
    best_step: int | None = None

    @property
    def final_loss(self) -> float:
        tail = self.losses[-max(1, len(self.losses) // 10):]
        return sum(tail) / len(tail)


def estimated_acceptance_length(top1: list[float], k: int = TTT_STEPS) -> float:
    """1 + a0 + a0*a1 + ... from top-1 accuracies per draft position (the last one repeats for a
    single-position drafter such as the draft model): a cheap stand-in for vLLM's measurement."""
    if not top1:
        return 1.0
    rates = list(top1[:k]) + [top1[-1]] * (k - len(top1))
    length, run = 1.0, 1.0
    for a in rates:
        run *= a
        length += run
    return length


def validate(model, method: str, val: list[Sequence], batch_size: int, device: str) -> tuple[float, list[float]]:
    """Mean loss and top-1 per draft position over held-back sequences (no gradients)."""
    import torch

    losses, accs = [], []
    with torch.no_grad():
        for i in range(0, len(val), batch_size):
            batch = {k: t.to(device) for k, t in make_batch(val[i:i + batch_size]).items()}
            loss, acc = ttt_loss(model, batch) if method in ("eagle", "eagle3") else model.loss(batch)
            losses.append(float(loss))
            accs.append(acc)
    per_pos = [round(sum(a[j] for a in accs) / len(accs), 3) for j in range(min(len(a) for a in accs))]
    return sum(losses) / len(losses), per_pos


def make_batch(seqs: list[Sequence]) -> dict:
    import torch

    L = max(len(s.ids) for s in seqs)
    pad = lambda t, n: torch.nn.functional.pad(t, (0, 0, 0, n - t.shape[0])) if t.dim() == 2 else \
        torch.nn.functional.pad(t, (0, n - t.shape[0]))  # noqa: E731
    batch = {"ids": torch.stack([pad(s.ids, L) for s in seqs]),
             "lengths": torch.tensor([len(s.ids) for s in seqs]),
             "prompt_lens": torch.tensor([s.prompt_len for s in seqs]),
             "greedy": torch.stack([pad(s.greedy, L) for s in seqs])}
    if seqs[0].final is not None:
        batch["final"] = torch.stack([pad(s.final, L) for s in seqs])
    if seqs[0].aux is not None:
        batch["aux"] = torch.stack([pad(s.aux, L) for s in seqs])
    return batch


def build_drafter(method: str, seqs: list[Sequence], device: str = "cpu", draft_vocab: int | None = None,
                  medusa_layers: int | None = None):
    model = _build_drafter(method, seqs, draft_vocab, medusa_layers or MEDUSA_LAYERS)
    model.to(device)
    return model


def _build_drafter(method: str, seqs: list[Sequence], draft_vocab: int | None = None,
                   medusa_layers: int = MEDUSA_LAYERS):
    tensors = drafters.target_weights("model.embed_tokens.weight", *(
        [f"model.layers.{i}.{n}" for i in DRAFT_INIT_LAYERS for n in _LAYER_NAMES] + ["model.norm.weight"]
        if method == "draft_model" else []))
    embed = tensors["model.embed_tokens.weight"].float()
    cfg = drafters.target_config()
    if method == "medusa":
        return MedusaHeads(cfg, embed, vocab_subset(seqs), num_layers=medusa_layers)
    subset = vocab_subset(seqs)
    if method == "eagle":
        return EagleHead(cfg, embed, subset)
    if method == "eagle3":
        return Eagle3Head(cfg, embed, subset, draft_vocab=draft_vocab)
    if method == "draft_model":
        return DraftModel(cfg, embed, subset, init=tensors)
    raise SpeclabError(f"cannot train method {method!r}: choose one of {', '.join(TRAIN_METHODS)}")


_LAYER_NAMES = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                "input_layernorm.weight", "post_attention_layernorm.weight")


def train(method: str, out: str | Path | None = None, *, steps: int | None = None, batch_size: int = DEFAULT_BATCH,
          lr: float | None = None, num_sequences: int | None = None, data: str | Path = DATA_FILE,
          features: list[Sequence] | None = None, threads: int = 2, seed: int = 0, max_len: int = MAX_LEN,
          log_every: int | None = None, quiet: bool = False, device: str = "cpu", val_fraction: float = 0.0,
          draft_vocab: int | None = None, max_seconds: float | None = None,
          stop_after: int | None = None, medusa_layers: int | None = None,
          hand_written_repeats: int = 1) -> TrainResult:
    """Train one drafter on self-distilled data and save it (vLLM layout + card.json) to ``out``.

    ``max_seconds`` bounds the run: training stops after the step that passes it (the card then
    records the steps done), which keeps a CPU run, or a borrowed GPU, within a known time.
    ``stop_after`` stops after that many steps of a ``steps``-long schedule (how a capped run is repeated).
    ``hand_written_repeats`` shows each answer to a hand-written prompt that many times per pass.
    """
    import random

    import torch

    if method not in TRAIN_METHODS:
        raise SpeclabError(f"cannot train method {method!r}: choose one of {', '.join(TRAIN_METHODS)}")
    # refuse bad options before the target features, which take hours on the CPU
    if draft_vocab and method != "eagle3":
        raise SpeclabError(f"draft_vocab applies to eagle3 only, not {method!r}")
    if medusa_layers is not None and method != "medusa":
        raise SpeclabError(f"medusa_layers applies to medusa only, not {method!r}")
    if medusa_layers is not None and medusa_layers < 1:
        raise SpeclabError(f"medusa_layers must be 1 or more, not {medusa_layers}")
    if hand_written_repeats < 1:
        raise SpeclabError(f"hand_written_repeats must be 1 or more, not {hand_written_repeats}")
    torch.set_num_threads(threads)
    if str(device).startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True  # float32 products on tensor cores: several times faster
    torch.manual_seed(seed)
    steps = steps or DEFAULT_STEPS[method]
    log_every = log_every or max(1, steps // 16)  # also how often held-back prompts are scored
    lr = lr or DEFAULT_LR[method]
    started = time.perf_counter()
    rows = load_data(data, num_sequences)
    seqs = features or features_for(method, rows, max_len=max_len)
    feature_s = time.perf_counter() - started
    model = build_drafter(method, seqs, device, draft_vocab, medusa_layers)
    params = model.parameters()
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * s / steps)))
    rng = random.Random(seed)
    prompts = sorted({s.prompt_id for s in seqs})  # hold back whole prompts: no answer to a held-back prompt is trained on
    held = set(random.Random(seed + 1).sample(prompts, int(len(prompts) * val_fraction)))
    val = [s for s in seqs if s.prompt_id in held and s.sample == 0]  # judged on greedy text, as vLLM will be
    seqs = [s for s in seqs if s.prompt_id not in held]
    seqs += [s for s in seqs if is_hand_written(s.prompt_id)] * (hand_written_repeats - 1)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i].ids))  # similar lengths batch together
    groups = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    result = TrainResult(method, Path(out) if out else None, steps, 0.0)
    for step in range(steps):
        batch = {key: t.to(device) for key, t in make_batch([seqs[i] for i in rng.choice(groups)]).items()}
        loss, accs = ttt_loss(model, batch) if method in ("eagle", "eagle3") else model.loss(batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        result.losses.append(float(loss.detach()))
        result.accuracies.append(accs)
        last = step == steps - 1 or (stop_after is not None and step + 1 >= stop_after) or \
            (max_seconds is not None and time.perf_counter() - started > max_seconds)
        logging = step % log_every == 0 or last
        if val and logging:  # keep the parameters that do best on held-back training sequences
            val_loss, val_accs = validate(model, method, val, batch_size, device)
            result.validation.append((step, val_loss, val_accs))
            length = estimated_acceptance_length(val_accs)
            if length > result.best_val_length:  # not the loss: it rises with overconfidence while top-1 still improves
                result.best_val_length, result.best_val_loss, result.best_step = length, val_loss, step
                best = [p.detach().clone() for p in params]
        if not quiet and logging:
            shown = f" | val {result.validation[-1][1]:.3f}" if val else ""
            print(f"[{method}] step {step:4d} loss {loss.detach().item():.3f} acc {' '.join(f'{a:.2f}' for a in accs)}{shown} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
        if last:
            result.steps = step + 1
            break
    if val:
        with torch.no_grad():
            for p, b in zip(params, best):
                p.copy_(b)
    result.seconds = time.perf_counter() - started
    if out is not None:
        save(model, Path(out), result, rows, feature_s, batch_size=batch_size, lr=lr, threads=threads, seed=seed,
             data=data, max_len=max_len, device=str(device), val_fraction=val_fraction, draft_vocab=draft_vocab,
             schedule_steps=steps, hand_written_repeats=hand_written_repeats, num_sequences=num_sequences)
    return result


def save(model, out: Path, result: TrainResult, rows: list[dict], feature_s: float, **settings) -> Path:
    """Weights in bf16 (the dtype the CPU profile runs), config.json, and a card without acceptance yet.

    A drafter saved into ``data/drafters/<method>`` is then stored packed, as the repository ships
    it (``drafters.pack``; ``drafters.loadable`` assembles it for vLLM); anywhere else it stays bf16.
    """
    import torch

    tensors = {k: (v.cpu().to(torch.bfloat16) if v.is_floating_point() else v.cpu()) for k, v in model.export().items()}
    n = max(1, len(result.accuracies) // 10)
    tail = list(zip(*[a for a in result.accuracies[-n:] if a])) or [[]]
    written = sum(1 for r in rows if str(r.get("id", "")).startswith("self-"))  # ids from self_written_prompts
    passages = sum(1 for r in rows if str(r.get("id", "")).startswith("passage-"))  # ids from passage_prompts
    documents = sum(1 for r in rows if str(r.get("id", "")).startswith("document-"))  # ids from document_rows
    card = {
        "method": model.method, "trained": True, "target": "SmolLM2-135M-Instruct",
        "data": {"source": "self-distillation: the target's answers (vLLM) to data/prompts/train.jsonl"
                           + (", to prompts it wrote itself" if written else "")
                           + (", to prompts built around its own answers" if passages else "")
                           + (", to requests for documents and tasks over them" if documents else ""),
                 "self_written_prompts": written, "passage_prompts": passages, "document_rows": documents,
                 "file": str(Path(settings["data"]).name), "sequences": len(rows),
                 "greedy_answers": sum(1 for r in rows if not r.get("sample")),
                 "sampled_answers": sum(1 for r in rows if r.get("sample")),
                 "answer_tokens": sum(len(r["answer_ids"]) for r in rows), "max_len": settings["max_len"]},
        "training": {"steps": result.steps, "schedule_steps": settings["schedule_steps"],
                     "batch_size": settings["batch_size"], "lr": settings["lr"],
                     "threads": settings["threads"], "seed": settings["seed"], "device": settings["device"],
                     "seconds": round(result.seconds, 1),
                     "feature_seconds": round(feature_s, 1), "final_loss": round(result.final_loss, 4),
                     "first_loss": round(result.losses[0], 4) if result.losses else None,
                     "train_top1_per_position": [round(sum(c) / len(c), 3) for c in tail if c],
                     "validation": ({"sequences_held_back": settings["val_fraction"], "best_step": result.best_step,
                                     "loss": round(result.best_val_loss, 4),
                                     "estimated_acceptance_length": round(result.best_val_length, 3),
                                     "top1_per_position": next(v[2] for v in result.validation
                                                               if v[0] == result.best_step)}
                                    if result.validation else None),
                     "draft_vocab": settings.get("draft_vocab"),
                     "command": f"python -m speclab.train --method {model.method} --data {settings['data']} "
                                + (f"--num-sequences {len(rows)} " if settings.get("num_sequences") else "") +
                                f"--steps {settings['schedule_steps']} --batch-size {settings['batch_size']} --lr {settings['lr']} "
                                + (f"--stop-after {result.steps} " if result.steps != settings["schedule_steps"] else "") +
                                f"--val-fraction {settings['val_fraction']}"
                                + (f" --draft-vocab {settings['draft_vocab']}" if settings.get("draft_vocab") else "")
                                + (f" --medusa-layers {len(model.w[0])}" if model.method == "medusa" else "")
                                + (f" --hand-written-repeats {settings['hand_written_repeats']}"
                                   if settings["hand_written_repeats"] > 1 else ""),
                     "hand_written_repeats": settings["hand_written_repeats"]},
        "acceptance": None,
    }
    with atomic_folder(out) as scratch:
        drafters.write_folder(scratch, model.config(), tensors, card)
    (out / ".complete").unlink(missing_ok=True)  # a shipped folder needs no cache marker
    if Path(out).resolve().parent == drafters.SHIPPED_DIR.resolve():
        drafters.pack(out, out)
    return out


# ---------------------------------------------------------------- acceptance, measured with vLLM

def evaluate(folders: dict, *, k: int = 3, prompts: str = "heldout", num_prompts: int | None = None,
             output_len: int = 128, enforce_eager: bool = False, write_card: bool = True, log=None,
             profile: str = "cpu-tiny") -> dict:
    """Acceptance with vLLM for ``{name: folder}``: one baseline, then each drafter (greedy).

    The method is the card's (or the name, for a folder without one). Writes the measurement
    into each folder's card.json (``acceptance``) and returns them by name.
    """

    records, inputs = bench.prompt_inputs(profile, prompts, num_prompts=num_prompts)
    methods = {name: drafters.read_card(f).get("method", name) for name, f in folders.items()}
    cfgs = [configs.build(methods[n], k=k, model=str(drafters.loadable(methods[n], f))) for n, f in folders.items()]
    results = bench.sweep(profile, cfgs, inputs, bench.greedy(output_len), dataset=f"data/prompts/{prompts}.jsonl",
                          enforce_eager=enforce_eager, log=log)
    out = {}
    for (name, folder), result in zip(folders.items(), results):
        s, b = result.speculative, result.baseline
        out[name] = {
            "method": methods[name], "k": k, "prompt_set": f"data/prompts/{prompts}.jsonl", "num_prompts": len(records),
            "output_len": output_len, "temperature": 0, "enforce_eager": enforce_eager,
            "acceptance_length": round(s.counters.acceptance_length, 4),
            "draft_acceptance_rate": round(s.counters.draft_acceptance_rate, 4),
            "per_position_rates": [round(r, 4) for r in s.counters.per_position_rates],
            "tokens_per_s": round(s.output_tokens_per_s, 2), "baseline_tokens_per_s": round(b.output_tokens_per_s, 2),
            "speedup": round(result.speedup, 3), "outputs_identical": result.outputs_identical,
            "greedy_ok": result.greedy_check.ok,
            "device": device_name(),
        }
        if write_card:
            card = drafters.read_card(folder)
            card["acceptance"] = out[name]
            write_json(Path(folder) / drafters.CARD, card)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m speclab.train", description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=TRAIN_METHODS, required=True)
    parser.add_argument("--out", help="output folder (default: data/drafters/<method>)")
    parser.add_argument("--data", default=str(SHIPPED_DATA), help=f"self-distilled data (default: {SHIPPED_DATA.name})")
    parser.add_argument("--steps", type=int, help="length of the learning-rate schedule (default: the recipe's)")
    parser.add_argument("--stop-after", type=int, help="stop after N steps of the schedule (default: the recipe's)")
    parser.add_argument("--max-seconds", type=float, help="stop once the run has taken this long")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--num-sequences", type=int, help="train on the first N rows of the data "
                                                            "(default: the recipe's, with the shipped data)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--val-fraction", type=float, default=0.1, help="prompts held back to pick the best step")
    parser.add_argument("--draft-vocab", type=int, help=f"eagle3 only: own lm_head over the N most frequent tokens "
                                                          f"(default {EAGLE3_DRAFT_VOCAB}; 0: the target's full lm_head)")
    parser.add_argument("--medusa-layers", type=int, help=f"medusa only: residual blocks per head "
                                                            f"(default {MEDUSA_LAYERS})")
    parser.add_argument("--hand-written-repeats", type=int,
                        help="each answer to a hand-written prompt this many times per pass (default: the recipe's)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--generate-data", action="store_true",
                        help=f"first make {DATA_FILE.name} with vLLM on this machine, and train on it")
    parser.add_argument("--samples", type=int, default=0, help="with --generate-data: sampled answers per prompt")
    parser.add_argument("--self-written", type=int, default=0,
                        help="with --generate-data: also N prompts the target writes itself, with greedy answers")
    parser.add_argument("--passages", type=int, default=0,
                        help="with --generate-data: also N prompts built around those answers (RAG, summaries, code)")
    parser.add_argument("--chat-written", type=int, default=0,
                        help="with --generate-data: also N self-written prompts that open like everyday questions")
    parser.add_argument("--documents", type=int, default=0,
                        help="with --generate-data: also N documents the target writes, with a task over each")
    parser.add_argument("--evaluate", action="store_true", help="measure acceptance with vLLM (k=3, held-out prompts)")
    parser.add_argument("--num-prompts", type=int, help="held-out prompts for --evaluate (default: all)")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    data = Path(args.data)
    if args.generate_data:
        print(f"generating self-distillation data into {DATA_FILE} ...", flush=True)
        data = generate_data(samples=args.samples, self_written=args.self_written, passages=args.passages,
                             chat_written=args.chat_written, documents=args.documents)
    out = Path(args.out) if args.out else drafters.SHIPPED_DIR / args.method
    draft_vocab = recipe(args.method)["draft_vocab"] if args.draft_vocab is None else (args.draft_vocab or None)
    stop_after = args.stop_after if args.stop_after or args.steps else recipe(args.method)["stop_after"]
    repeats = args.hand_written_repeats or recipe(args.method)["hand_written_repeats"]
    num_sequences = args.num_sequences or (recipe(args.method)["num_sequences"] if data == SHIPPED_DATA else None)
    result = train(args.method, out, steps=args.steps, batch_size=args.batch_size, lr=args.lr, data=data,
                   num_sequences=num_sequences, threads=args.threads, draft_vocab=draft_vocab,
                   val_fraction=args.val_fraction, device=args.device, stop_after=stop_after,
                   max_seconds=args.max_seconds, medusa_layers=args.medusa_layers, hand_written_repeats=repeats)
    print(f"saved {out} ({result.steps} steps, {result.seconds:.0f} s, final loss {result.final_loss:.3f})")
    if args.evaluate:
        print(json.dumps(evaluate({args.method: out}, num_prompts=args.num_prompts), indent=2))


if __name__ == "__main__":
    main()
