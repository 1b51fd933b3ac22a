"""The training loop: batches of similar length, AdamW with a warm-up and cosine schedule, held-back
prompts scored every few steps (the best parameters are kept), and the drafter saved in the
layout vLLM loads, with a card that says how it was made."""

from __future__ import annotations

import dataclasses
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..errors import SpeclabError
from ..files import atomic_folder
from ..models import drafter_layouts, drafter_packing, drafters
from .data import DATA_FILE, is_hand_written, load_data
from .heads import Head, build_drafter
from .hidden_states import MAX_LEN, Features, features_for
from .recipes import EVAL_K, TRAIN_METHODS, Recipe, recipe


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


def estimated_acceptance_length(top1: list[float], k: int = EVAL_K) -> float:
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


def held_out_accuracy(model: Head, val: list[Features], batch_size: int, device: str) -> tuple[float, list[float]]:
    """Mean loss and top-1 per draft position over held-back sequences (no gradients)."""
    losses, accs = [], []
    with torch.no_grad():
        for i in range(0, len(val), batch_size):
            batch = {k: t.to(device) for k, t in make_batch(val[i:i + batch_size]).items()}
            loss, acc = model.loss(batch)
            losses.append(float(loss))
            accs.append(acc)
    per_pos = [round(sum(a[j] for a in accs) / len(accs), 3) for j in range(min(len(a) for a in accs))]
    return sum(losses) / len(losses), per_pos


def make_batch(seqs: list[Features]) -> dict:
    """Right-padded tensors of a few rows: ids, lengths, prompt lengths, labels and the features."""
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


def train(method: str, out: str | Path | None = None, *, steps: int | None = None, batch_size: int | None = None,
          lr: float | None = None, num_sequences: int | None = None, data: str | Path = DATA_FILE,
          features: list[Features] | None = None, threads: int = 2, seed: int = 0, max_len: int = MAX_LEN,
          log_every: int | None = None, quiet: bool = False, device: str = "cpu", val_fraction: float | None = None,
          draft_vocab: int | None = None, max_seconds: float | None = None, stop_after: int | None = None,
          medusa_layers: int | None = None, hand_written_repeats: int | None = None,
          ttt_steps: int | None = None) -> TrainResult:
    """Train one drafter on self-distilled data and save it (vLLM layout + card.json) to ``out``.

    Every setting left out is the method's recipe (:func:`recipe`), except the data: ``data`` and
    ``num_sequences`` default to the local file (``**recipe(method).train_kwargs()`` repeats a
    shipped run whole). ``draft_vocab=0`` gives EAGLE-3 the target's full lm_head.
    ``max_seconds`` bounds the run: training stops after the step that passes it (the card then
    records the steps done), which keeps a CPU run, or a borrowed GPU, within a known time.
    ``stop_after`` stops after that many steps of a ``steps``-long schedule (how a capped run is repeated).
    ``hand_written_repeats`` shows each answer to a hand-written prompt that many times per pass.
    ``ttt_steps`` (EAGLE, EAGLE-3): how many draft steps the loss unrolls.
    """
    if method not in TRAIN_METHODS:
        raise SpeclabError(f"cannot train method {method!r}: choose one of {', '.join(TRAIN_METHODS)}")
    r = recipe(method)
    # refuse bad options before the target features, which take hours on the CPU
    if draft_vocab and method != "eagle3":
        raise SpeclabError(f"draft_vocab applies to eagle3 only, not {method!r}")
    if medusa_layers is not None and method != "medusa":
        raise SpeclabError(f"medusa_layers applies to medusa only, not {method!r}")
    if medusa_layers is not None and medusa_layers < 1:
        raise SpeclabError(f"medusa_layers must be 1 or more, not {medusa_layers}")
    if hand_written_repeats is not None and hand_written_repeats < 1:
        raise SpeclabError(f"hand_written_repeats must be 1 or more, not {hand_written_repeats}")
    if ttt_steps is not None and method not in ("eagle", "eagle3"):
        raise SpeclabError(f"ttt_steps applies to eagle and eagle3 only, not {method!r}")
    if ttt_steps is not None and ttt_steps < 1:
        raise SpeclabError(f"ttt_steps must be 1 or more, not {ttt_steps}")
    if stop_after is None and steps is None:
        stop_after = r.stop_after  # the recipe's stop belongs to the recipe's schedule
    used = dataclasses.replace(
        r, steps=steps or r.steps, lr=lr or r.lr, batch_size=batch_size or r.batch_size, stop_after=stop_after,
        data=Path(data), num_sequences=num_sequences,
        val_fraction=r.val_fraction if val_fraction is None else val_fraction,
        draft_vocab=r.draft_vocab if draft_vocab is None else (draft_vocab or None),
        medusa_layers=medusa_layers or r.medusa_layers, ttt_steps=ttt_steps or r.ttt_steps,
        hand_written_repeats=hand_written_repeats or r.hand_written_repeats)
    torch.set_num_threads(threads)
    if str(device).startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True  # float32 products on tensor cores: several times faster
    torch.manual_seed(seed)
    steps, batch_size = used.steps, used.batch_size
    log_every = log_every or max(1, steps // 16)  # also how often held-back prompts are scored
    started = time.perf_counter()
    rows = load_data(data, num_sequences)
    seqs = features or features_for(method, rows, max_len=max_len, device=device)  # the target runs where the head does
    feature_s = time.perf_counter() - started
    model = build_drafter(method, seqs, device, used.draft_vocab, used.medusa_layers, used.ttt_steps)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=used.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * s / steps)))
    rng = random.Random(seed)
    # hold back whole prompts: no answer to a held-back prompt is trained on
    prompts = sorted({s.prompt_id for s in seqs})
    held = set(random.Random(seed + 1).sample(prompts, int(len(prompts) * used.val_fraction)))
    val = [s for s in seqs if s.prompt_id in held and s.sample == 0]  # judged on greedy text, as vLLM will be
    seqs = [s for s in seqs if s.prompt_id not in held]
    seqs += [s for s in seqs if is_hand_written(s.prompt_id)] * (used.hand_written_repeats - 1)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i].ids))  # similar lengths batch together
    groups = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    result = TrainResult(method, Path(out) if out else None, steps, 0.0)
    for step in range(steps):
        batch = {key: t.to(device) for key, t in make_batch([seqs[i] for i in rng.choice(groups)]).items()}
        loss, accs = model.loss(batch)
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
            val_loss, val_accs = held_out_accuracy(model, val, batch_size, device)
            result.validation.append((step, val_loss, val_accs))
            length = estimated_acceptance_length(val_accs)
            if length > result.best_val_length:  # not the loss: it rises with overconfidence while top-1 still improves
                result.best_val_length, result.best_val_loss, result.best_step = length, val_loss, step
                best = [p.detach().clone() for p in params]
        if not quiet and logging:
            shown = f" | val {result.validation[-1][1]:.3f}" if val else ""
            print(f"[{method}] step {step:4d} loss {loss.detach().item():.3f} acc "
                  f"{' '.join(f'{a:.2f}' for a in accs)}{shown} "
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
        if num_sequences:
            used = dataclasses.replace(used, num_sequences=len(rows))
        save(model, Path(out), result, rows, feature_s, used, threads=threads, seed=seed, max_len=max_len,
             device=str(device))
    return result


def save(model: Head, out: Path, result: TrainResult, rows: list[dict], feature_s: float, used: Recipe, *,
         threads: int, seed: int, max_len: int, device: str) -> Path:
    """Weights in bf16 (the dtype the CPU profile runs), config.json, and a card without acceptance yet.

    A drafter saved into ``data/drafters/<method>`` is then stored packed, as the repository ships
    it (``drafter_packing.pack``; ``drafters.loadable`` assembles it for vLLM); anywhere else it stays bf16.
    ``used`` holds the settings of the run; the card's command repeats it.
    """
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
                 "file": used.data.name, "sequences": len(rows),
                 "greedy_answers": sum(1 for r in rows if not r.get("sample")),
                 "sampled_answers": sum(1 for r in rows if r.get("sample")),
                 "answer_tokens": sum(len(r["answer_ids"]) for r in rows), "max_len": max_len},
        "training": {"steps": result.steps, "schedule_steps": used.steps,
                     "batch_size": used.batch_size, "lr": used.lr,
                     "threads": threads, "seed": seed, "device": device,
                     "seconds": round(result.seconds, 1),
                     "feature_seconds": round(feature_s, 1), "final_loss": round(result.final_loss, 4),
                     "first_loss": round(result.losses[0], 4) if result.losses else None,
                     "train_top1_per_position": [round(sum(c) / len(c), 3) for c in tail if c],
                     "validation": ({"sequences_held_back": used.val_fraction, "best_step": result.best_step,
                                     "loss": round(result.best_val_loss, 4),
                                     "estimated_acceptance_length": round(result.best_val_length, 3),
                                     "top1_per_position": next(v[2] for v in result.validation
                                                               if v[0] == result.best_step)}
                                    if result.validation else None),
                     "draft_vocab": used.draft_vocab,
                     "command": used.command(stopped_after=result.steps),
                     "hand_written_repeats": used.hand_written_repeats},
        "acceptance": None,
    }
    with atomic_folder(out) as scratch:
        drafter_layouts.write_folder(scratch, model.config(), tensors, card)
    (out / ".complete").unlink(missing_ok=True)  # a shipped folder needs no cache marker
    if Path(out).resolve().parent == drafters.SHIPPED_DIR.resolve():
        drafter_packing.pack(out, out)
    return out
