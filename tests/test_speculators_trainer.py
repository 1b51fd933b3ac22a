"""speculators' data layout and trainer call, built from speclab's rows (the training itself runs on a GPU)."""

import json
import os

import pytest
import torch

from speclab import train
from speclab.errors import SpeclabError
from speclab.models import drafter_layouts
from speclab.train import speculators_trainer


def test_row_states_put_the_three_eagle3_layers_first_and_the_last_layer_fourth():
    h = 4
    aux = torch.arange(2 * 3 * h, dtype=torch.float32).reshape(2, 3 * h)  # two places, layers a|b|c side by side
    last = -torch.ones(2, h)
    states = speculators_trainer.row_states(aux, last)
    assert states.shape == (2, 4, h)
    assert states[1, 0].tolist() == [12, 13, 14, 15] and states[1, 2].tolist() == [20, 21, 22, 23]
    assert states[0, 3].tolist() == [-1, -1, -1, -1]


def test_the_last_state_is_the_one_before_the_final_norm():
    """speculators applies the target's norm to what it stores: norm(kept) must be transformers' own output."""
    rows = train.load_data(num_sequences=2)
    model = train.load_target()
    before = train.target_features(rows, model, max_len=64, before_final_norm=True)
    after = train.target_features(rows, model, max_len=64)
    for b, a in zip(before, after):
        with torch.no_grad():
            renormed = model.model.norm(b.final.float())
        # both are stored in bf16 (8 significant bits): equal to within its rounding, relative to the value
        assert bool(((renormed - a.final.float()).abs() <= 0.02 * a.final.float().abs() + 0.02).all())
        assert float((b.final.float() - a.final.float()).abs().max()) > 1.0  # really the un-normed state


def test_the_trainer_command_names_speclabs_eagle3_layers_and_draft_vocabulary():
    cmd = speculators_trainer.train_command("/d", "/s", epochs=6)
    assert cmd[1:4] == ["-m", "speculators", "train"]
    at = cmd.index("--target-layer-ids")
    assert cmd[at + 1:at + 4] == ["2", "15", "27"]
    assert cmd[cmd.index("--draft-vocab-size") + 1] == "8192" and cmd[cmd.index("--epochs") + 1] == "6"
    assert cmd[cmd.index("--on-missing") + 1] == "raise"  # no vLLM server behind the data: a missing file is an error


def test_checkpoint_prefers_the_best_then_the_last_epoch(tmp_path):
    with pytest.raises(SpeclabError, match="no checkpoint under"):
        speculators_trainer.checkpoint(tmp_path)
    for epoch in (0, 2, 10):
        (tmp_path / str(epoch)).mkdir()
    assert speculators_trainer.checkpoint(tmp_path).name == "10"  # by number, not by name
    os.symlink(tmp_path / "2", tmp_path / "checkpoint_best", target_is_directory=True)
    assert speculators_trainer.checkpoint(tmp_path) == (tmp_path / "2").resolve()


def test_a_speculators_folder_is_told_by_its_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"speculators_config": {"algorithm": "eagle3"}}))
    assert drafter_layouts.is_speculators_folder(tmp_path)
    assert not drafter_layouts.is_speculators_folder(train.SHIPPED_DATA.parent / "eagle3")


def test_without_the_library_one_line_says_what_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "speculators", None)  # as if not installed
    with pytest.raises(SpeclabError, match=r"pip install speculators"):
        speculators_trainer.require_speculators()


def test_validation_reads_speculators_per_pass_metrics(tmp_path):
    """speculators writes <epoch>/val_metrics.json for each pass that lowered the loss; "checkpoint_best" is a link."""
    for epoch, loss, accs in ((0, 8.2861, (0.4351, 0.2019)), (2, 6.5274, (0.5216, 0.2934))):
        (tmp_path / str(epoch)).mkdir()
        metrics = {"loss_epoch": loss, **{f"full_acc_{i}_epoch": a for i, a in enumerate(accs)}, "cond_acc_0_epoch": 1}
        (tmp_path / str(epoch) / "val_metrics.json").write_text(json.dumps(metrics))
    (tmp_path / "checkpoint_best").mkdir()
    (tmp_path / "checkpoint_best" / "val_metrics.json").write_text(json.dumps({"loss_epoch": 0.0}))
    assert speculators_trainer.validation(tmp_path) == {"epoch": [0, 2], "loss": [8.286, 6.527],
                                            "top1_position_1": [0.435, 0.522], "top1_position_2": [0.202, 0.293]}


def test_a_run_of_another_size_is_not_resumed(tmp_path):
    (tmp_path / "steps.json").write_text(json.dumps({"rows": 64, "epochs": 2}))
    with pytest.raises(SpeclabError, match="another --out"):
        speculators_trainer.train_both(tmp_path, num_rows=32, epochs=2, device="cpu")


def test_the_recorded_comparison_is_like_for_like():
    """Both heads of the recorded run saw the same rows for the same passes, and all three were measured."""
    run = speculators_trainer.recorded()
    ours = run["speclab"]
    assert ours["steps"] == round(run["epochs"] * run["rows"] / ours["batch_size"])
    assert len(run["speculators"]["validation"]["epoch"]) == run["epochs"]
    rows = run["acceptance"]
    assert set(rows) == {"speculators", "speclab", "speclab, shipped"}
    assert len({(r["prompt_set"], r["k"], r["output_len"], r["baseline_tokens_per_s"]) for r in rows.values()}) == 1
    for r in rows.values():  # acceptance length = 1 + the per-position rates' sum
        assert r["acceptance_length"] == pytest.approx(1 + sum(r["per_position_rates"]), abs=2e-3)
