"""``python -m speclab.train --method eagle``: train a drafter with its recipe, save it, and with
``--evaluate`` measure its acceptance with vLLM on the held-out prompts (written into its card, with the
short quick check the tests repeat).
Every option left out is the method's recipe (:mod:`speclab.train.recipes`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..models import drafters
from ..vllm_layer.engine import exit_on_sigterm
from .data import DATA_FILE, generate_data
from .evaluate import QUICK_CHECK, evaluate
from .loop import train
from .recipes import EVAL_K, SHIPPED_DATA, TRAIN_METHODS, recipe


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m speclab.train", description="Train a drafter for SmolLM2-135M-Instruct "
                                "with its recipe and save it in the layout vLLM loads.")
    p.add_argument("--method", choices=TRAIN_METHODS, required=True)
    p.add_argument("--out", help="output folder (default: data/drafters/<method>)")
    p.add_argument("--data", help=f"self-distilled data (default: the recipe's, {SHIPPED_DATA.name})")
    p.add_argument("--steps", type=int, help="length of the learning-rate schedule (default: the recipe's)")
    p.add_argument("--stop-after", type=int, help="stop after N steps of the schedule (default: the recipe's)")
    p.add_argument("--max-seconds", type=float, help="stop once the run has taken this long")
    p.add_argument("--batch-size", type=int, help="default: the recipe's")
    p.add_argument("--lr", type=float, help="default: the recipe's")
    p.add_argument("--num-sequences", type=int, help="train on the first N rows of the data "
                                                       "(default: the recipe's, with the recipe's data)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--val-fraction", type=float, help="prompts held back to pick the best step (default: the recipe's)")
    p.add_argument("--draft-vocab", type=int, help="eagle3 only: own lm_head over the N most frequent tokens "
                                                     "(default: the recipe's; 0: the target's full lm_head)")
    p.add_argument("--medusa-layers", type=int, help="medusa only: residual blocks per head (default: the recipe's)")
    p.add_argument("--hand-written-repeats", type=int,
                   help="each answer to a hand-written prompt this many times per pass (default: the recipe's)")
    p.add_argument("--ttt-steps", type=int,
                   help="eagle, eagle3: draft steps unrolled in training (default: the recipe's)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--generate-data", action="store_true",
                   help=f"first make {DATA_FILE.name} with vLLM on this machine, and train on it")
    p.add_argument("--samples", type=int, default=0, help="with --generate-data: sampled answers per prompt")
    p.add_argument("--self-written", type=int, default=0,
                   help="with --generate-data: also N prompts the target writes itself, with greedy answers")
    p.add_argument("--passages", type=int, default=0,
                   help="with --generate-data: also N prompts built around those answers (RAG, summaries, code)")
    p.add_argument("--chat-written", type=int, default=0,
                   help="with --generate-data: also N self-written prompts that open like everyday questions")
    p.add_argument("--documents", type=int, default=0,
                   help="with --generate-data: also N documents the target writes, with a task over each")
    p.add_argument("--evaluate", action="store_true",
                   help=f"measure acceptance with vLLM (k={EVAL_K}, held-out prompts)")
    p.add_argument("--num-prompts", type=int, help="held-out prompts for --evaluate (default: all)")
    return p


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    exit_on_sigterm()
    r = recipe(args.method)
    data = Path(args.data) if args.data else r.data
    if args.generate_data:
        print(f"generating self-distillation data into {DATA_FILE} ...", flush=True)
        data = generate_data(samples=args.samples, self_written=args.self_written, passages=args.passages,
                             chat_written=args.chat_written, documents=args.documents)
    out = Path(args.out) if args.out else drafters.SHIPPED_DIR / args.method
    num_sequences = args.num_sequences or (r.num_sequences if data == r.data else None)
    result = train(args.method, out, steps=args.steps, batch_size=args.batch_size, lr=args.lr, data=data,
                   num_sequences=num_sequences, threads=args.threads, draft_vocab=args.draft_vocab,
                   val_fraction=args.val_fraction, device=args.device, stop_after=args.stop_after,
                   max_seconds=args.max_seconds, medusa_layers=args.medusa_layers,
                   hand_written_repeats=args.hand_written_repeats, ttt_steps=args.ttt_steps)
    print(f"saved {out} ({result.steps} steps, {result.seconds:.0f} s, final loss {result.final_loss:.3f})")
    if args.evaluate:
        print(json.dumps(evaluate({args.method: out}, num_prompts=args.num_prompts), indent=2))
        evaluate({args.method: out}, card_key="quick_check", **QUICK_CHECK)  # what the test suite repeats


if __name__ == "__main__":
    main()
