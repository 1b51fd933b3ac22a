"""Drafter training at CI size: the loss falls, and the saved folder runs in vLLM."""

import json

import pytest

from speclab import train
from speclab.measure import equality
from speclab.models import drafter_layouts, drafter_packing, drafters
from speclab.vllm_layer import configs
from speclab.models.profiles import PROFILES


@pytest.fixture(scope="module")
def small_features():
    rows = train.load_data(num_sequences=4)
    return train.target_features(rows, max_len=256)


@pytest.mark.parametrize("method", train.TRAIN_METHODS)
def test_ci_size_training_lowers_the_loss_and_saves_a_vllm_layout(method, small_features, tmp_path):
    out = tmp_path / method
    result = train.train(method, out, steps=12, batch_size=2, num_sequences=4, features=small_features,
                         lr=3e-3 if method != "draft_model" else 1e-3, threads=2, quiet=True)
    first, last = sum(result.losses[:3]) / 3, sum(result.losses[-3:]) / 3
    assert last < first, result.losses
    card = json.loads((out / "card.json").read_text())
    assert card["trained"] is True and card["training"]["steps"] == 12
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()


def test_padding_in_a_batch_changes_no_feature_and_no_label(small_features):
    rows = train.load_data(num_sequences=4)
    alone = train.target_features(rows, max_len=256, batch_size=1)
    for a, b in zip(small_features, alone):
        assert torch_equal(a.ids, b.ids) and torch_equal(a.greedy, b.greedy)
        assert float((a.final.float() - b.final.float()).abs().max()) < 0.1


def test_labels_are_the_targets_own_greedy_choices(small_features):
    # the rows are greedy answers made by vLLM on this CPU: the target's argmax reproduces them
    # (bf16 vLLM against float32 transformers may break a near-tie now and then)
    hits = total = 0
    for s in small_features:
        answer = s.ids[s.prompt_len:]
        hits += int((s.greedy[s.prompt_len - 1:-1] == answer).sum())
        total += len(answer)
    assert hits / total > 0.95


def test_eagle3_features_skip_the_last_hidden_state():
    rows = train.load_data(num_sequences=1)
    (seq,) = train.features_for("eagle3", rows, max_len=64)
    assert seq.final is None and seq.aux.shape == (64, 3 * drafter_layouts.target_config()["hidden_size"])
    (seq,) = train.features_for("eagle", rows, max_len=64)
    assert seq.aux is None and seq.final.shape == (64, drafter_layouts.target_config()["hidden_size"])


@pytest.mark.engine
def test_the_target_writes_varied_prompts_that_begin_with_their_starters(greedy_runs):
    written = greedy_runs["self_written"]
    assert len(written) >= 3 and len({p.text for p in written}) == len(written)
    for p in written:
        number = int(p.id.rsplit("-", 1)[1])
        category, start = train.STARTERS[number % len(train.STARTERS)]
        assert p.category == category and p.text.startswith(start.strip()) and len(p.text.split()) >= 4


PASSAGE = ("Tides are caused mainly by the pull of the Moon. The Moon pulls hardest on the near side of the Earth, "
           "so the ocean there bulges towards it. A second bulge forms on the far side, where the pull is weakest. "
           "As the Earth turns, most coasts pass through both bulges each day, which gives two high tides. The Sun "
           "adds a smaller pull of its own, and when it lines up with the Moon the tides are larger than usual, "
           "which sailors call spring tides. Neap tides come when the two pull at right angles to each other.")
CODE = "Here it is:\n\n```python\ndef area(w, h):\n    result = w * h\n    print(result)\n    return result\n```\nDone."


def test_passage_prompts_put_the_targets_own_text_in_the_prompt():
    pairs = [("What causes the tides?", PASSAGE), ("Write a function for the area", CODE),
             ("Say hello", "Hello!"), ("Repeat", "yes " * 80)]  # too short; the model repeating itself
    prompts = train.passage_prompts(pairs, 2 * len(train.PASSAGE_TASKS))
    assert len(prompts) == 2 * len(train.PASSAGE_TASKS) and len({p.id for p in prompts}) == len(prompts)
    for p in prompts:
        if p.category == "code":
            assert "def area(w, h):\n    result = w * h" in p.text and "Here it is" not in p.text
        elif p.category == "translation":
            assert p.text.endswith("so the ocean there bulges towards it.")
        else:
            assert PASSAGE in p.text and "Hello" not in p.text and "yes yes" not in p.text
        if p.category == "rag":
            assert "What causes the tides?" in p.text
    assert {p.category for p in prompts} == {"rag", "summarisation", "translation", "code"}


def test_document_prompts_ask_for_each_kind_on_a_topic_of_its_own_groups():
    asked = train.document_prompts(2 * len(train.DOCUMENT_KINDS), seed=3)
    assert asked == train.document_prompts(2 * len(train.DOCUMENT_KINDS), seed=3)  # the seed fixes the topics
    assert len({p.id for p in asked}) == len(asked)
    for i, p in enumerate(asked):
        kind, request, question, groups = train.DOCUMENT_KINDS[i % len(train.DOCUMENT_KINDS)]
        assert p.category == kind and p.turns == (p.text, question)
        assert any(p.text == request.format(topic=t) for g in groups for t in train.DOCUMENT_TOPICS[g]), p.text


def test_document_tasks_put_each_document_that_does_not_loop_in_a_prompt():
    asked = train.document_prompts(len(train.DOCUMENT_TASKS) + 1)
    answers = [PASSAGE] * len(train.DOCUMENT_TASKS) + ["The bus is late. " * 20]  # the last one loops
    made = train.document_tasks(asked, answers)
    assert [p.id for p in made] == [f"document-task-0-{i}" for i in range(len(train.DOCUMENT_TASKS))]
    for p, q, (category, _) in zip(made, asked, train.DOCUMENT_TASKS):
        assert p.category == category and PASSAGE in p.text and "{" not in p.text
        if category == "rag":
            assert p.text.endswith(q.turns[1])  # the question that goes with the document's kind
    assert not train.is_hand_written(made[0].id) and not train.is_hand_written(asked[0].id)


def test_user_turns_cut_the_turn_out_of_the_chat_template():
    from transformers import AutoTokenizer

    from speclab.models.provision import fetch_smollm2

    tokenizer = AutoTokenizer.from_pretrained(str(fetch_smollm2(quiet=True)))
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What causes the tides?"}],
                                           add_generation_prompt=True, tokenize=False)
    row = {"prompt_ids": tokenizer.encode(prompt, add_special_tokens=False),
           "answer_ids": tokenizer.encode("The Moon.", add_special_tokens=False) + [tokenizer.eos_token_id]}
    assert train.user_turns(tokenizer, [row]) == [("What causes the tides?", "The Moon.")]


def torch_equal(a, b):
    import torch

    return torch.equal(a, b)


def test_a_capped_run_records_where_it_stopped_and_how_to_repeat_it(small_features, tmp_path):
    result = train.train("medusa", tmp_path / "m", steps=10, stop_after=3, batch_size=2, num_sequences=4,
                         features=small_features, quiet=True)
    card = json.loads((tmp_path / "m" / "card.json").read_text())["training"]
    assert result.steps == 3 and len(result.losses) == 3
    assert card["steps"] == 3 and card["schedule_steps"] == 10 and "--steps 10 " in card["command"]
    assert "--stop-after 3 " in card["command"]


def test_medusa_heads_with_several_blocks_save_each_block_where_vllm_reads_it(small_features, tmp_path):
    from safetensors.torch import load_file

    train.train("medusa", tmp_path / "m", steps=2, batch_size=2, num_sequences=4, features=small_features,
                quiet=True, medusa_layers=2)
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert (cfg["num_heads"], cfg["num_hidden_layers"]) == (drafter_layouts.MEDUSA_HEADS, 2)
    keys = set(load_file(tmp_path / "m" / "model.safetensors"))
    assert keys == {f"blocks.{m}.layers.{j}.weight" for m in range(cfg["num_heads"]) for j in range(2)}
    assert "--medusa-layers 2" in json.loads((tmp_path / "m" / "card.json").read_text())["training"]["command"]


def test_a_drafter_trained_into_the_shipped_folder_is_stored_packed(small_features, tmp_path, monkeypatch):
    monkeypatch.setattr(drafters, "SHIPPED_DIR", tmp_path / "shipped")
    for out in (tmp_path / "shipped" / "medusa", tmp_path / "elsewhere"):
        train.train("medusa", out, steps=2, batch_size=2, num_sequences=4, features=small_features, quiet=True)
    shipped = tmp_path / "shipped" / "medusa"
    assert sorted(f.name for f in shipped.iterdir()) == ["card.json", "config.json", drafter_packing.PACKED]
    assert "int8" in drafter_layouts.read_card(shipped)["storage"]
    assert (drafters.loadable("medusa", shipped) / drafter_layouts.WEIGHTS).is_file()
    assert sorted(f.name for f in (tmp_path / "elsewhere").iterdir()) == ["card.json", "config.json",
                                                                          drafter_layouts.WEIGHTS]


def test_hand_written_prompts_are_told_apart_and_repeated_on_request(small_features, tmp_path):
    assert train.is_hand_written("1001") and train.is_hand_written(1001)
    assert not train.is_hand_written("self-00042") and not train.is_hand_written("passage-00007")
    train.train("medusa", tmp_path / "m", steps=2, batch_size=2, num_sequences=4, features=small_features,
                quiet=True, hand_written_repeats=3)
    training = json.loads((tmp_path / "m" / "card.json").read_text())["training"]
    assert training["hand_written_repeats"] == 3 and "--hand-written-repeats 3" in training["command"]


@pytest.mark.parametrize("kwargs, message", [({"hand_written_repeats": 0}, "1 or more"),
                                             ({"medusa_layers": 0}, "1 or more"),
                                             ({"medusa_layers": 2, "method": "eagle"}, "medusa only")])
def test_bad_training_options_are_refused(kwargs, message, small_features):
    method = kwargs.pop("method", "medusa")
    with pytest.raises(train.SpeclabError, match=message):
        train.train(method, None, steps=1, features=small_features, **kwargs)


def test_unknown_method_is_refused():
    with pytest.raises(train.SpeclabError, match="choose one of"):
        train.train("ngram", None, steps=1)


def test_ttt_attention_sees_only_its_own_earlier_steps():
    import torch

    layer = train.LlamaLayer(drafter_layouts.target_config())
    torch.manual_seed(0)
    q = torch.randn(1, 9, 5, 64)
    k0, v0 = torch.randn(1, 9, 5, 64), torch.randn(1, 9, 5, 64)
    k1, v1 = torch.randn(1, 9, 5, 64), torch.randn(1, 9, 5, 64)
    base = layer.attend(q, [k0, k1], [v0, v1])
    # changing step-1 keys/values at place 3 changes only place 3's output
    k1b, v1b = k1.clone(), v1.clone()
    k1b[..., 3, :] += 1.0
    v1b[..., 3, :] += 1.0
    moved = (layer.attend(q, [k0, k1b], [v0, v1b]) - base).abs().sum(-1)[0]
    assert moved[3] > 0 and torch.all(moved[[0, 1, 2, 4]] == 0)


@pytest.mark.engine
def test_a_trained_eagle_head_loads_in_vllm_and_keeps_greedy_outputs(small_features, tmp_path, greedy_runs,
                                                                     lesson_prompts):
    from speclab.measure.bench import greedy, run_one
    from tests.conftest import OUTPUT_LEN

    out = tmp_path / "eagle"
    train.train("eagle", out, steps=4, batch_size=2, num_sequences=4, features=small_features, quiet=True)
    _, inputs = lesson_prompts
    stats, _ = run_one(PROFILES["cpu-tiny"], configs.eagle(str(out), k=3), inputs, greedy(OUTPUT_LEN), "eagle",
                       enforce_eager=True)
    equality.check_runs(greedy_runs["baseline"], stats).require("a freshly trained EAGLE head")
    assert stats.counters.num_drafts > 0


def test_ttt_steps_sets_how_many_draft_steps_an_eagle_head_learns(small_features, tmp_path):
    one = train.train("eagle", tmp_path / "e", steps=2, batch_size=2, num_sequences=4, features=small_features,
                      quiet=True, ttt_steps=1)
    assert all(len(a) == 1 for a in one.accuracies)
    assert "--ttt-steps 1" in json.loads((tmp_path / "e" / "card.json").read_text())["training"]["command"]
    default = train.train("eagle", None, steps=2, batch_size=2, features=small_features, quiet=True)
    assert all(len(a) == train.recipe("eagle").ttt_steps for a in default.accuracies)
    with pytest.raises(train.SpeclabError, match="eagle and eagle3 only"):
        train.train("medusa", None, steps=1, features=small_features, ttt_steps=2)


@pytest.mark.parametrize("method", train.TRAIN_METHODS)
def test_the_command_line_reads_its_defaults_from_the_recipe(method):
    from speclab.train.__main__ import parser

    recipe = train.recipe(method)
    args = parser().parse_args(recipe.command().split()[3:])  # after "python -m speclab.train"
    assert (args.method, args.steps, args.lr, args.batch_size, args.val_fraction) == \
        (method, recipe.steps, recipe.lr, recipe.batch_size, recipe.val_fraction)
    assert (args.num_sequences, args.draft_vocab, args.medusa_layers) == \
        (recipe.num_sequences, recipe.draft_vocab, recipe.medusa_layers)
    bare = parser().parse_args(["--method", method])  # left out: None, which train() reads as the recipe's
    assert None is bare.steps is bare.lr is bare.batch_size is bare.val_fraction is bare.ttt_steps
