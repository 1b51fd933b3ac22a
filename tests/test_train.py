"""Drafter training at CI size: the loss falls, and the saved folder runs in vLLM."""

import json

import pytest

from speclab import configs, drafters, train


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


def test_unknown_method_is_refused():
    with pytest.raises(train.SpeclabError, match="choose one of"):
        train.train("ngram", None, steps=1)


def test_ttt_attention_sees_only_its_own_earlier_steps():
    import torch

    layer = train.Layer(drafters.target_config())
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
    from speclab.bench import greedy, run_one
    from tests.conftest import OUTPUT_LEN

    out = tmp_path / "eagle"
    train.train("eagle", out, steps=4, batch_size=2, num_sequences=4, features=small_features, quiet=True)
    _, inputs = lesson_prompts
    stats, _ = run_one("cpu-tiny", configs.eagle(str(out), k=3), inputs, greedy(OUTPUT_LEN), "eagle",
                       enforce_eager=True)
    assert stats.token_ids == greedy_runs["baseline"].token_ids
    assert stats.counters.num_drafts > 0
