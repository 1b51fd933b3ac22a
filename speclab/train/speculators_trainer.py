"""EAGLE-3 heads trained with speculators, vLLM's drafter library, on speclab's own training rows.

speclab's heads (:mod:`speclab.train.loop`) are written out in plain torch to be read; a real model's
head is trained with the field's library. speculators reads a ``datasets`` folder of rows
(``input_ids``, ``loss_mask``: 1 on the answer, ``seq_len``) and, per row, one safetensors file of the
target's hidden states: ``hidden_states`` [L, 4, h] (the inputs of EAGLE-3's three layers, 2, 15 and
27 for SmolLM2, then the last layer's output before the final norm) and ``token_ids`` [L]. Its own tool
makes them with a vLLM server; here the target runs in transformers over the rows speclab's head learns
from, so the two heads see the same data. The trained checkpoint is in speculators' format, which
vLLM loads as it is (``"method": "eagle3"``, ``"model": <folder>``).

Needs ``pip install speculators`` (with ``datasets``); a GPU for any real size.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import torch

from ..errors import SpeclabError
from ..files import REPO_ROOT, write_json
from ..models import drafter_layouts, drafters
from ..models.profiles import PROFILES, Profile, get_profile
from ..models.provision import fetch_smollm2
from ..vllm_layer.envcheck import device_name, versions
from .data import load_data
from .evaluate import evaluate
from .hidden_states import MAX_LEN, load_target, target_features
from .loop import train as train_own
from .recipes import SHIPPED_DATA, recipe

HIDDEN_STATES = "hidden_states"  # speculators' file backend: <data>/hidden_states/hs_<row>.safetensors
RECORDED = REPO_ROOT / "data" / "drafters" / "speculators_eagle3.json"  # compare()'s recorded run


def require_speculators() -> None:
    """One line, before any work, where speculators or datasets is missing."""
    try:
        import datasets  # noqa: F401
        import speculators  # noqa: F401
    except ImportError as err:
        raise SpeclabError(f"training with speculators needs `pip install speculators` ({err.name} is missing)") \
            from None


def row_states(aux: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """[L, 3h] auxiliary states and [L, h] last-layer states -> speculators' [L, 4, h]."""
    length, hidden = last.shape
    return torch.cat([aux.reshape(length, -1, hidden), last.unsqueeze(1)], dim=1)


def write_dataset(rows: list[dict], out: str | Path, *, model=None, device: str = "cuda", chunk: int = 512,
                  max_len: int = MAX_LEN, log=print) -> Path:
    """Write ``rows`` (speclab's training rows: ``prompt_ids``, ``answer_ids``) in speculators' layout."""
    from datasets import Dataset
    from safetensors.torch import save_file
    from speculators.train.vocab_mapping import save_token_frequency_distribution

    out = Path(out)
    (out / HIDDEN_STATES).mkdir(parents=True, exist_ok=True)
    model = model or load_target(device)
    columns = {"input_ids": [], "loss_mask": [], "seq_len": []}
    started = time.perf_counter()
    for start in range(0, len(rows), chunk):
        part = rows[start:start + chunk]
        feats = target_features(part, model, aux_layers=drafter_layouts.EAGLE3_AUX_LAYERS, max_len=max_len,
                                before_final_norm=True)
        for i, f in enumerate(feats, start):
            ids = f.ids.cpu()
            save_file({"hidden_states": row_states(f.aux, f.final).cpu().contiguous(), "token_ids": ids},
                      str(out / HIDDEN_STATES / f"hs_{i}.safetensors"))
            columns["input_ids"].append(ids.tolist())
            columns["loss_mask"].append([0] * min(f.prompt_len, len(ids)) + [1] * max(0, len(ids) - f.prompt_len))
            columns["seq_len"].append(len(ids))
        if log:
            done = min(start + chunk, len(rows))
            log(f"hidden states: {done}/{len(rows)} rows, {time.perf_counter() - started:.0f} s")
    dataset = Dataset.from_dict(columns)
    dataset.set_format(type="torch")
    dataset.save_to_disk(str(out))
    save_token_frequency_distribution(dataset, out / "token_freq.pt")  # speculators' draft vocabulary comes from it
    return out


def train_command(data: str | Path, save_path: str | Path, *, epochs: int, lr: float = 1e-3,
                  draft_vocab: int = 8192, ttt_steps: int = 3, total_seq_len: int = 8192,
                  num_workers: int = 4) -> list[str]:
    """``python -m speculators train ...`` for an EAGLE-3 head on SmolLM2 (speculators' defaults otherwise)."""
    aux = [str(i) for i in drafter_layouts.EAGLE3_AUX_LAYERS]
    return [sys.executable, "-m", "speculators", "train", "--speculator-type", "eagle3",
            "--verifier-name-or-path", str(fetch_smollm2(quiet=True)), "--data-path", str(data),
            "--save-path", str(save_path), "--epochs", str(epochs), "--lr", str(lr),
            "--draft-vocab-size", str(draft_vocab), "--ttt-steps", str(ttt_steps),
            "--total-seq-len", str(total_seq_len), "--num-workers", str(num_workers),
            "--on-missing", "raise", "--target-layer-ids", *aux,
            # its fused Triton loss failed under torch 2.11's compiler on the H200; the eager one is exact
            "--loss-implementation", "eager"]


def train(data: str | Path, save_path: str | Path, *, log_file: str | Path | None = None, **settings) -> dict:
    """Run speculators' trainer; returns the command, its seconds and the folder vLLM loads."""
    require_speculators()
    command = train_command(data, save_path, **settings)
    started = time.perf_counter()
    with open(log_file or Path(save_path).with_suffix(".log"), "w") as sink:
        proc = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SpeclabError(f"speculators train failed (exit {proc.returncode}); its output is in {sink.name}")
    return {"command": " ".join(command[1:]), "seconds": round(seconds, 1),
            "folder": str(checkpoint(save_path).resolve())}


def checkpoint(save_path: str | Path) -> Path:
    """The checkpoint speculators kept as best (by validation loss), else its last epoch."""
    save_path = Path(save_path)
    best = save_path / "checkpoint_best"
    if best.exists():
        return best.resolve()
    epochs = sorted((p for p in save_path.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    if not epochs:
        raise SpeclabError(f"no checkpoint under {save_path}: did speculators train finish?")
    return epochs[-1]


def validation(save_path: str | Path) -> dict:
    """speculators' held-back metrics per pass, from the ``<epoch>/val_metrics.json`` it writes for
    every pass that lowered the validation loss: the loss and top-1 accuracy at each draft position."""
    rows = sorted((int(p.parent.name), json.loads(p.read_text())) for p in Path(save_path).glob("*/val_metrics.json")
                  if p.parent.name.isdigit())
    curve = {"epoch": [e for e, _ in rows], "loss": [round(m.get("loss_epoch", float("nan")), 3) for _, m in rows]}
    positions = sorted({int(k.split("_")[2]) for _, m in rows for k in m if k.startswith("full_acc_")})
    for i in positions:
        curve[f"top1_position_{i + 1}"] = [round(m.get(f"full_acc_{i}_epoch", float("nan")), 3) for _, m in rows]
    return curve


def recorded() -> dict:
    """The recorded comparison (:func:`compare`'s record, heads trained on an H200): what lesson 11 shows."""
    return json.loads(RECORDED.read_text())


def train_both(out: str | Path, *, num_rows: int = 8000, epochs: int = 5, device: str = "cuda", log=print) -> dict:
    """Both paths on the same rows (the first ``num_rows`` of the shipped data) and the same number of
    passes over them: speculators' EAGLE-3 trainer, and speclab's own head (batch 32, its recipe's
    learning rate and draft vocabulary). Each step is recorded in ``<out>/steps.json`` with paths
    relative to ``out``: a run cut short resumes, and the folder can be measured on another machine."""
    out = Path(out)
    rows = load_data(SHIPPED_DATA, num_rows)
    done = out / "steps.json"
    steps_done = json.loads(done.read_text()) if done.is_file() else {}
    if steps_done and (steps_done.get("rows"), steps_done.get("epochs")) != (len(rows), epochs):
        raise SpeclabError(f"{out} holds a run of {steps_done.get('rows')} rows x {steps_done.get('epochs')} passes; "
                           "use another --out for a different size")
    steps_done.update(rows=len(rows), epochs=epochs)
    if "speculators" not in steps_done:
        require_speculators()
        started = time.perf_counter()
        write_dataset(rows, out / "data", device=device, log=log)
        states = round(time.perf_counter() - started, 1)
        run = train(out / "data", out / "speculators", epochs=epochs)
        steps_done["speculators"] = {
            "version": metadata.version("speculators"), "device": device_name(), "hidden_states_seconds": states,
            "train_seconds": run["seconds"], "command": run["command"],
            "folder": str(Path(run["folder"]).relative_to(out.resolve())),
            "validation": validation(out / "speculators")}
        write_json(done, steps_done)
    log(f"speculators: {steps_done['speculators']}")
    if "speclab" not in steps_done:
        own = recipe("eagle3")
        steps = max(1, round(epochs * len(rows) / own.batch_size))
        train_own("eagle3", out / "speclab", steps=steps, data=SHIPPED_DATA, num_sequences=num_rows,
                  device=device, draft_vocab=own.draft_vocab, lr=own.lr, quiet=True)
        steps_done["speclab"] = {"device": device_name(), "steps": steps, "batch_size": own.batch_size,
                                 **card_seconds(drafter_layouts.read_card(out / "speclab")), "folder": "speclab"}
        write_json(done, steps_done)
    log(f"speclab: {steps_done['speclab']}")
    return steps_done


def compare(out: str | Path, *, num_rows: int = 8000, epochs: int = 5, device: str = "cuda",
            profile: Profile = PROFILES["gpu-tiny"], result: str | Path | None = None, log=print) -> dict:
    """:func:`train_both`, then the two heads measured in vLLM side by side on ``profile`` with the
    shipped head beside them (the held-out prompts all at once, k=3, 64 tokens, greedy)."""
    out = Path(out)
    steps_done = train_both(out, num_rows=num_rows, epochs=epochs, device=device, log=log)
    heads = {"speculators": out / steps_done["speculators"]["folder"], "speclab": out / steps_done["speclab"]["folder"],
             "speclab, shipped": drafters.SHIPPED_DIR / "eagle3"}
    measured = evaluate(heads, profile=profile, output_len=64, write_card=False, log=log)
    env, row = versions(), next(iter(measured.values()))
    record = {
        "measured": f"{env['date'][:10]}, {device_name()}, vLLM {env['vllm']}, torch {env['torch']}; "
                    f"train.evaluate on profile {profile.name}: {row['prompt_set']} ({row['num_prompts']} prompts at "
                    f"once), k={row['k']}, {row['output_len']} tokens, greedy",
        **steps_done, "speclab_shipped": shipped_training(), "acceptance": measured}
    if result:
        write_json(result, record)
    return record


def card_seconds(card: dict) -> dict:
    """A speclab card's time, split: its ``seconds`` hold the target's features and the training both."""
    run = card["training"]
    return {"feature_seconds": run["feature_seconds"],
            "train_seconds": round(run["seconds"] - run["feature_seconds"], 1)}


def shipped_training() -> dict:
    """How the shipped EAGLE-3 head was trained (its card): the third column of the comparison."""
    card = drafter_layouts.read_card(drafters.SHIPPED_DIR / "eagle3")
    run = card["training"]
    return {"rows": card["data"]["sequences"], "steps": run["steps"], "batch_size": run["batch_size"],
            **card_seconds(card)}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=compare.__doc__)
    parser.add_argument("--out", default="/tmp/speculators-run")
    parser.add_argument("--num-rows", type=int, default=8000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--profile", default="gpu-tiny")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--result", default=None)
    parser.add_argument("--train-only", action="store_true", help="train both heads, measure them elsewhere")
    a = parser.parse_args()
    if a.train_only:
        train_both(a.out, num_rows=a.num_rows, epochs=a.epochs, device=a.device)
    else:
        print(json.dumps(compare(a.out, num_rows=a.num_rows, epochs=a.epochs, device=a.device,
                                 profile=get_profile(a.profile), result=a.result), indent=1))
