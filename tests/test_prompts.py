"""Prompt sets: bundled files, plain lists, selection, errors, and the chat template."""

import json
import subprocess
import sys
from collections import Counter

import pytest

from speclab.measure.prompts import (BUNDLED_DIR, Prompt, apply_chat_template, bundled, categories, chat_messages,
                                     load_prompts)
from speclab.models.profiles import SpeclabError

WORKLOADS = ["code", "chat", "summarisation", "rag", "translation", "maths"]


def one_line_error(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and message
    return message


# Spec-Bench's 13 categories: MT-bench's eight, then its own five, in its file's order
SPEC_BENCH_CATEGORIES = ["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities",
                         "translation", "summarization", "qa", "math_reasoning", "rag"]


# --- bundled sets -----------------------------------------------------------------------------


def test_bundled_names():
    assert bundled() == ["agentic", "heldout", "mtbench_style", "specbench_style", "train", "workloads"]


@pytest.mark.parametrize(
    "name, total, per_category",
    [
        ("workloads", 48, {c: 8 for c in WORKLOADS}),
        ("heldout", 24, {c: 4 for c in WORKLOADS}),
        ("mtbench_style", 16, {c: 2 for c in ["writing", "roleplay", "reasoning", "math", "coding", "extraction",
                                              "stem", "humanities"]}),
        ("specbench_style", 26, {c: 2 for c in SPEC_BENCH_CATEGORIES}),
        ("agentic", 12, {c: 4 for c in ["tool_call", "json_record", "agent_step"]}),
    ],
)
def test_bundled_counts(name, total, per_category):
    prompts = load_prompts(name)
    assert len(prompts) == total
    assert Counter(p.category for p in prompts) == per_category
    assert categories(name) == list(per_category)
    assert len({p.id for p in prompts}) == total
    assert all(isinstance(p, Prompt) and p.text == p.turns[0] and p.turn == 0 for p in prompts)


def test_train_set_covers_every_category():
    prompts = load_prompts("train")
    counts = Counter(p.category for p in prompts)
    assert 280 <= len(prompts) <= 320
    assert set(counts) == set(WORKLOADS) | {"general"}
    assert min(counts.values()) >= 30
    assert len({p.id for p in prompts}) == len(prompts)


def test_train_file_is_what_the_generator_writes(tmp_path):
    out = tmp_path / "train.jsonl"
    subprocess.run([sys.executable, str(BUNDLED_DIR / "make_train.py"), str(out)], check=True, capture_output=True)
    assert out.read_bytes() == (BUNDLED_DIR / "train.jsonl").read_bytes()


def test_no_prompt_text_shared_between_sets():
    seen = {}
    for name in bundled():
        for p in load_prompts(name, turns="each"):
            assert p.text not in seen, f"{name} {p.id} repeats {seen.get(p.text)}"
            seen[p.text] = (name, p.id)


def test_passage_workloads_carry_150_to_300_words():
    for p in (load_prompts("workloads", category=["summarisation", "rag"])
              + load_prompts("heldout", category=["summarisation", "rag"])):
        assert 150 <= len(p.text.split()) <= 300, (p.id, len(p.text.split()))
    for p in load_prompts("workloads", category="code"):
        assert "```" in p.text  # code to edit travels in the prompt


# --- selection ----------------------------------------------------------------------------------


def test_category_filter_and_count():
    code = load_prompts("workloads", category="code")
    assert [p.id for p in code] == list(range(1, 9))
    assert [p.id for p in load_prompts("workloads", category="code", num_prompts=3)] == [1, 2, 3]
    two = load_prompts("workloads", category=["rag", "maths"], num_prompts=4)
    assert Counter(p.category for p in two) == {"rag": 2, "maths": 2}


def test_small_num_prompts_spans_every_category():
    six = load_prompts("workloads", num_prompts=6)
    assert [p.category for p in six] == WORKLOADS  # one each, in file order
    assert [p.id for p in six] == [1, 9, 17, 25, 33, 41]
    assert len(load_prompts("workloads", num_prompts=500)) == 48


def test_each_turn_and_follow_up_messages():
    flat = load_prompts("mtbench_style", turns="each")
    assert len(flat) == 32
    first, second = flat[0], flat[1]
    assert (first.id, first.turn, second.id, second.turn) == (101, 0, 101, 1)
    assert chat_messages(first) == [{"role": "user", "content": first.turns[0]}]
    with pytest.raises(SpeclabError) as excinfo:
        chat_messages(second)
    assert "answers=" in one_line_error(excinfo)
    assert chat_messages(second, answers=["A sunny trip."], system="Be brief.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": second.turns[0]},
        {"role": "assistant", "content": "A sunny trip."},
        {"role": "user", "content": second.turns[1]},
    ]


# --- plain prompt lists -----------------------------------------------------------------------


def test_txt_one_prompt_per_line(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("Hello there\n\n  Write a haiku  \n")
    prompts = load_prompts(path)
    assert [(p.id, p.category, p.text) for p in prompts] == [(1, "general", "Hello there"),
                                                             (2, "general", "Write a haiku")]
    assert categories(str(path)) == ["general"]


def test_json_list_of_strings(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(["one", "two", "three"]))
    assert [p.text for p in load_prompts(path, num_prompts=2)] == ["one", "two"]


def test_jsonl_with_prompt_or_text_fields(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"prompt": "alpha", "category": "x"}, {"text": "beta"}, {"id": "q7", "prompt": "gamma", "category": "x"},
            "delta"]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    prompts = load_prompts(path)
    assert [(p.id, p.category, p.text) for p in prompts] == [(1, "x", "alpha"), (2, "general", "beta"),
                                                             ("q7", "x", "gamma"), (4, "general", "delta")]
    assert [p.text for p in load_prompts(path, category="x")] == ["alpha", "gamma"]


def test_question_shape_file(tmp_path):
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps({"question_id": 81, "category": "writing", "turns": ["t1", "t2"],
                                "reference": ["r"]}) + "\n")
    (prompt,) = load_prompts(path)
    assert prompt == Prompt(id=81, category="writing", text="t1", turns=("t1", "t2"), turn=0)


# --- errors: one line each ------------------------------------------------------------------


def test_unknown_bundled_name():
    with pytest.raises(SpeclabError) as excinfo:
        load_prompts("workload")
    message = one_line_error(excinfo)
    assert "unknown prompt set 'workload'" in message and "workloads" in message


def test_missing_file(tmp_path):
    with pytest.raises(SpeclabError) as excinfo:
        load_prompts(tmp_path / "nope.jsonl")
    assert "not found" in one_line_error(excinfo)
    with pytest.raises(SpeclabError) as excinfo:
        load_prompts(tmp_path)
    assert "is a folder" in one_line_error(excinfo)


def test_unknown_category_lists_the_available_ones():
    with pytest.raises(SpeclabError) as excinfo:
        load_prompts("workloads", category="poetry")
    assert one_line_error(excinfo).endswith("choose from code, chat, summarisation, rag, translation, maths")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("\n\n")
    with pytest.raises(SpeclabError) as excinfo:
        load_prompts(path)
    assert "holds no prompts" in one_line_error(excinfo)


def test_bad_rows_and_arguments(tmp_path):
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"prompt": "ok"}\n{"prompt": \n')
    no_text = tmp_path / "notext.jsonl"
    no_text.write_text('{"category": "code"}\n')
    cases = [
        (lambda: load_prompts(bad_json), "bad.jsonl:2: not valid JSON"),
        (lambda: load_prompts(no_text), "entry 1 has no prompt text"),
        (lambda: load_prompts("workloads", turns="all"), "use one of first, each"),
        (lambda: load_prompts("workloads", num_prompts=0), "positive whole number"),
    ]
    for call, expected in cases:
        with pytest.raises(SpeclabError) as excinfo:
            call()
        assert expected in one_line_error(excinfo)


def test_hub_dataset_fails_fast_offline(monkeypatch):
    # `datasets` is not a speclab dependency: without it (or offline without a cache) the
    # error says what to do instead of hanging on the network.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(SpeclabError) as excinfo:
        load_prompts("speclab-nobody/no-such-dataset")
    assert "local JSONL" in one_line_error(excinfo)


# --- chat template with the real SmolLM2 tokenizer --------------------------------------------


@pytest.fixture(scope="module")
def smollm2_folder():
    from speclab.models.provision import fetch_smollm2

    try:
        return fetch_smollm2(quiet=True)
    except SpeclabError as err:
        pytest.skip(f"SmolLM2 not provisioned: {err}")


def test_chat_template_applied_once(smollm2_folder):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder)
    prompts = load_prompts("workloads", num_prompts=3)
    texts = apply_chat_template(tokenizer, prompts, tokenize=False)
    for prompt, text in zip(prompts, texts):
        assert text.startswith("<|im_start|>system\n")
        assert f"<|im_start|>user\n{prompt.text}<|im_end|>\n" in text
        assert text.endswith("<|im_start|>assistant\n")
    encoded = apply_chat_template(tokenizer, prompts)
    for prompt, item in zip(prompts, encoded):
        ids = item["prompt_token_ids"]
        reference = tokenizer.apply_chat_template(chat_messages(prompt), tokenize=True, add_generation_prompt=True,
                                                  return_dict=False)
        assert ids == reference
        assert ids[0] == tokenizer.bos_token_id and ids[1] != tokenizer.bos_token_id
    # a system prompt replaces the template's default one
    (custom,) = apply_chat_template(str(smollm2_folder), ["Hi"], tokenize=False, system="Answer in French.")
    assert custom.startswith("<|im_start|>system\nAnswer in French.<|im_end|>\n<|im_start|>user\nHi<|im_end|>")


def test_no_double_bos_with_a_bos_adding_tokenizer(smollm2_folder):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder, add_bos_token=True)
    bos = tokenizer.bos_token_id
    (text,) = apply_chat_template(tokenizer, ["Hello"], tokenize=False)
    assert tokenizer.encode(text)[:2] == [bos, bos]  # the trap: encoding adds a second BOS
    (item,) = apply_chat_template(tokenizer, ["Hello"])
    assert item["prompt_token_ids"][0] == bos and item["prompt_token_ids"][1] != bos


def test_tokenizer_without_template(smollm2_folder):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder)
    tokenizer.chat_template = None
    with pytest.raises(SpeclabError) as excinfo:
        apply_chat_template(tokenizer, ["Hello"])
    assert "no chat template" in one_line_error(excinfo)


def test_per_category_takes_the_first_of_every_category():
    first = load_prompts("specbench_style", per_category=1)
    assert [p.category for p in first] == SPEC_BENCH_CATEGORIES
    assert [p.id for p in first] == list(range(301, 327, 2))
    assert len(load_prompts("specbench_style", per_category=5)) == 26  # all of a smaller category
    assert [p.id for p in load_prompts("workloads", category="chat", per_category=2)] == [
        p.id for p in load_prompts("workloads", category="chat")][:2]
    with pytest.raises(SpeclabError, match="not both"):
        load_prompts("workloads", num_prompts=4, per_category=1)
    with pytest.raises(SpeclabError, match="per_category must be a positive whole number"):
        load_prompts("workloads", per_category=0)
