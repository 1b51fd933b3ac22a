"""Prompts built from text alone (no engine): the starters of self-written prompts, and tasks over
passages and documents the target wrote. :mod:`speclab.train.data` sends them to the target."""

from __future__ import annotations

import random
import re

from ..measure.prompts import Prompt

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
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind, request, question, groups = DOCUMENT_KINDS[i % len(DOCUMENT_KINDS)]
        text = request.format(topic=rng.choice([t for g in groups for t in DOCUMENT_TOPICS[g]]))
        out.append(Prompt(f"document-{seed}-{i}", kind, text, (text, question)))
    return out


def document_tasks(asked: list, answers: list[str], seed: int = 0) -> list:
    """One prompt over each written document, in turn from ``DOCUMENT_TASKS``; documents that loop are skipped.

    Greedy decoding makes a 135M model repeat itself after a paragraph or two: :func:`passage_prompts`
    drops a text whose words are less than 45% distinct.
    """

    made = []
    for i, (p, answer) in enumerate(zip(asked, answers)):
        category, template = DOCUMENT_TASKS[i % len(DOCUMENT_TASKS)]
        for task in passage_prompts([(p.turns[1], answer)], 1, seed=i, min_words=40, max_words=260,
                                    tasks=((category, template.replace("{kind}", p.category)),)):
            made.append(Prompt(f"document-task-{seed}-{i}", task.category, task.text, task.turns))
    return made
