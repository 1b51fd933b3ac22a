"""The whole GPU sweep in one command: ``python -m speclab.measure.gpu_sweep``.

It measures, on the ``gpu-synthetic`` profile (Llama-3.1-8B shape, random weights, acceptance
imposed by hand), everything the notebooks show as "what you should see on a GPU":

- ``speedup_surface``: a plain baseline and draft_model (Llama-3.2-1B shape) over acceptance a,
  k and batch size; the data behind the measured cost model (``speclab.algorithms.theory.StepCost``);
- ``methods``: EAGLE- and EAGLE-3-shaped heads at the same imposed acceptance;
- ``tp2``: the target split over two GPUs (only where two are visible); vLLM's draft_model path
  refuses a draft on fewer GPUs than the target, which speclab reports before starting an engine;
- ``block_drafting``: on the Qwen3-8B shape, an EAGLE-3 head (k passes per draft) against a DFlash
  block drafter (one pass for all k) at the same imposed acceptance, over k.

One H200 took about 40-80 s to start each engine and 30 s to measure it; each point is measured on
``--engines`` fresh engines (default 3) and stored as their median with the spread, so the whole
sweep is about an hour of GPU time (a call that stops at ``--deadline-s`` resumes on the next).

Each part writes ``<output_dir>/<part>.json`` (default ``data/gpu_reference``) after every
point, so an interrupted sweep keeps what it measured and a rerun resumes where it stopped: it
measures the points missing from the file and those stored from fewer than ``--engines`` engines,
replacing their rows (``--fresh`` starts over). Engines run one after another in this process, each shut down
(and its GPU memory seen free) before the next starts. ``--deadline-s`` stops starting new
engines in time for a time-boxed machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SpeclabError
from ..files import write_json
from ..models.profiles import PROFILES, Profile
from ..vllm_layer.engine import exit_on_sigterm, open_engine
from ..vllm_layer.envcheck import gpus, versions
from . import synthetic
from .bench import measure
from .synthetic import with_speedups

ENGINE_START_ALLOWANCE_S = 90  # do not start an engine with less time than this left before the deadline


@dataclass(frozen=True)
class Engine:
    """One engine to open: a label, its speculative config (None: plain decoding), its settings."""

    label: str
    method: str  # "baseline" for plain decoding
    k: int = 0
    a: float | None = None
    draft: str | None = None
    tensor_parallel_size: int = 1
    options: dict = field(default_factory=dict)  # for the method's config builder
    target: str | None = None  # a shape in place of the profile's target (e.g. "shape:qwen3-8b")

    def speculative_config(self, check: bool = True) -> dict | None:
        if self.method == "baseline":
            return None
        return synthetic.config(self.method, self.k, a=self.a, draft=self.draft, check=check, **self.options)


def surface_plan(grid=((2, 0.8), (4, 0.8), (2, 0.6), (2, 0.9), (4, 0.6), (4, 0.9), (3, 0.7), (1, 0.9), (5, 0.9)),
                 draft: str = "shape:llama-3.2-1b") -> list[Engine]:
    """Baseline, then draft_model over (k, a). The cost model is fitted on the a=0.8 runs; the rest test it."""
    return [Engine("baseline", "baseline")] + [
        Engine(f"draft_model k={k} a={a}", "draft_model", k, a, draft) for k, a in grid]


def methods_plan(k: int = 4, a: float = 0.8) -> list[Engine]:
    """EAGLE- and EAGLE-3-shaped heads at the acceptance the draft_model surface also has (k=4, a=0.8);
    their speedups are over the surface's baseline (see ``surface_baseline``)."""
    return [Engine(f"eagle k={k} a={a}", "eagle", k, a), Engine(f"eagle3 k={k} a={a}", "eagle3", k, a)]


def tp2_plan(a: float = 0.8, k: int = 4) -> list[Engine]:
    """The target over two GPUs; draft_model with its draft on one GPU, and on both (where vLLM refuses one)."""
    draft_one = {"draft_tensor_parallel_size": 1}
    return [Engine("baseline tp=2", "baseline", tensor_parallel_size=2),
            Engine(f"draft_model k={k} a={a} tp=2 draft_tp=1", "draft_model", k, a, "shape:llama-3.2-1b", 2, draft_one),
            Engine(f"draft_model k={k} a={a} tp=2 draft_tp=2", "draft_model", k, a, "shape:llama-3.2-1b", 2,
                   {"draft_tensor_parallel_size": 2}),
            Engine(f"eagle k={k} a={a} tp=2 draft_tp=1", "eagle", k, a, None, 2, draft_one)]


def block_drafting_plan(ks=(3, 7, 15), a: float = 0.8, target: str = "shape:qwen3-8b") -> list[Engine]:
    """Sequential against block drafting at the same acceptance: EAGLE-3 runs its head k times per
    draft, DFlash runs its 5 layers once for all k (15 is the published drafters' block of 16, less one)."""
    plan = [Engine("baseline qwen3-8b", "baseline", target=target)]
    for method, draft in (("eagle3", "shape:eagle3-qwen3-8b"), ("dflash", "shape:dflash-qwen3-8b")):
        plan += [Engine(f"{method} k={k} a={a} qwen3-8b", method, k, a, draft, target=target) for k in ks]
    return plan


PLANS = {"speedup_surface": surface_plan, "methods": methods_plan, "tp2": tp2_plan,
         "block_drafting": block_drafting_plan}


# ---------------------------------------------------------------- the machine and its software

def gpu_memory_used_mib() -> list[int]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True)
    return [int(float(x)) for x in out.stdout.split()]


def wait_gpu_free(limit_mib: int = 2048, timeout_s: float = 60.0) -> float:
    """Block until every GPU's memory is (nearly) free again: the last engine's process is gone."""
    if not shutil.which("nvidia-smi"):
        return 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        if max(gpu_memory_used_mib() or [0]) < limit_mib:
            break
        time.sleep(1.0)
    return time.perf_counter() - start


# ---------------------------------------------------------------- measuring one engine

def _row(engine: Engine, batch: int, stats, reps: list[float], output_len: int) -> dict:
    c = stats.counters
    row = {"label": engine.label, "method": engine.method, "k": engine.k, "a": engine.a,
           "tensor_parallel_size": engine.tensor_parallel_size, "batch": batch,
           "output_tokens": stats.output_tokens, "elapsed_s": round(stats.elapsed_s, 5),
           "elapsed_reps_s": [round(x, 5) for x in reps], "tokens_per_s": round(stats.output_tokens_per_s, 3),
           "engine_start_s": round(stats.engine_start_s or 0.0, 2)}
    if engine.method == "baseline":
        row["step_ms"] = round(1000 * stats.elapsed_s / output_len, 4)
        return row
    steps = c.num_drafts / batch  # mean speculative steps per request
    row.update({"imposed_length": round(1.0 + sum(synthetic.acceptance_rates(engine.a, engine.k)), 5),
                "acceptance_length": round(c.acceptance_length, 5), "per_position_rates": c.per_position_rates,
                "num_drafts": c.num_drafts, "num_draft_tokens": c.num_draft_tokens,
                "num_accepted_tokens": c.num_accepted_tokens,
                "step_ms": round(1000 * stats.elapsed_s / steps, 4) if steps else None})
    return row


def measure_engine(profile: Profile, engine: Engine, batches: list[int], prompt_len: int, output_len: int,
                   reps: dict[int, int], engine_options: dict, log=print) -> list[dict]:
    """Open one engine, warm it up, time every batch size (best of a few runs), close it."""

    # Without this, vLLM 0.26 forked its engine core from a process that had already touched CUDA
    # (device detection) and every engine died with "Cannot re-initialize CUDA in forked subprocess".
    os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    target = engine.target or profile.target
    prompts = synthetic.token_prompts(max(batches), prompt_len, target)
    sampling = synthetic.sampling(output_len)
    rows = []
    overrides = {**synthetic.engine_overrides(), **engine_options}
    if engine.target:
        overrides["model"] = synthetic.model_dir(engine.target)
    with open_engine(profile, engine.speculative_config(), tensor_parallel_size=engine.tensor_parallel_size,
                     **overrides) as llm:
        log(f"speclab: {engine.label}: engine up in {llm.speclab_start_seconds:.1f} s")
        llm.generate(prompts, synthetic.sampling(16), use_tqdm=False)  # warm-up at the largest batch
        for batch in batches:
            runs = [measure(llm, prompts[:batch], sampling, label=engine.label) for _ in range(reps.get(batch, 2))]
            best = min(runs, key=lambda r: r.elapsed_s)
            row = _row(engine, batch, best, [r.elapsed_s for r in runs], output_len)
            rows.append(row)
            log(f"speclab: {engine.label} batch={batch}: {row['tokens_per_s']:.1f} tok/s, step {row['step_ms']} ms"
                + (f", acceptance length {row['acceptance_length']:.3f} (imposed {row['imposed_length']:.3f})"
                   if "acceptance_length" in row else ""))
    return rows


TIMINGS = (*synthetic.RATE_TIMINGS, "engine_start_s")


def median_rows(per_engine: list[list[dict]]) -> list[dict]:
    """The same engine opened several times -> one row per batch size: the median of each timing, every
    engine's own timings beside it (``engines``) and their spread (fastest / slowest tokens/s - 1).

    A fresh engine of the same config moved throughput by 10-20% on an H200 (same acceptance), so a
    stored figure is a median over fresh engines, not one engine's luck.
    """
    rows = []
    for same_batch in zip(*per_engine):  # every engine measures the batch sizes in the same order
        row = dict(same_batch[0])
        for key in TIMINGS + ("acceptance_length",):
            if key in row:
                row[key] = round(statistics.median(r[key] for r in same_batch), 5)
        row["engines"] = [{key: r[key] for key in TIMINGS if key in r} for r in same_batch]
        speeds = [r["tokens_per_s"] for r in same_batch]
        row["spread"] = round(max(speeds) / min(speeds) - 1, 4)
        rows.append(row)
    return rows


# ---------------------------------------------------------------- a part: plan -> file

def surface_baseline(doc: dict, output_dir: str | Path) -> list[dict]:
    """The surface part's baseline rows, for a part without its own (``methods``): one plain-decoding
    measurement, on the same GPU, settings and number of fresh engines, for every part. Empty when
    the surface has none measured with these engine settings."""
    surface = Path(output_dir) / "speedup_surface.json"
    if not surface.is_file():
        return []
    ref = json.loads(surface.read_text())
    if ref.get("settings", {}).get("engine") != doc["settings"]["engine"]:
        return []
    return [r for r in ref["runs"] if r["method"] == "baseline"]


def use_baseline(doc: dict, base: list[dict]) -> None:
    """Put ``base`` in place of the part's own baseline rows; without any, the part keeps its own."""
    if not base:
        return
    doc["runs"] = [r for r in doc["runs"] if r["method"] != "baseline"] + base
    doc["baseline_from"] = "speedup_surface"


def measured_labels(doc: dict, engines: int) -> set[str]:
    """Labels already measured on at least ``engines`` fresh engines; a point stored from fewer (an older,
    single-engine sweep) is measured again and its rows replaced."""
    counts: dict[str, int] = {}
    for r in doc.get("runs", []):
        n = len(r.get("engines", [None]))
        counts[r["label"]] = min(counts.get(r["label"], n), n)
    return {label for label, n in counts.items() if n >= engines}


def run_part(name: str, profile: Profile, args, started: float, log=print) -> dict:
    """Measure every engine of a part not yet in its file; rewrite the file after each engine."""
    path = Path(args.output_dir) / f"{name}.json"
    doc = json.loads(path.read_text()) if path.is_file() and not args.fresh else {}
    done = measured_labels(doc, args.engines)
    plan = PLANS[name]()
    if name == "tp2" and len(gpus()) < 2:
        log("speclab: tp2 skipped: fewer than two GPUs visible")
        return doc
    doc.update({"name": name, "note": synthetic.IMPOSED, "profile": profile.name,
                "target": next((e.target for e in plan if e.target), profile.target),
                "settings": {"prompt_len": args.prompt_len, "output_len": args.output_len, "batches": args.batches,
                             "timing": f"per engine the best of its repetitions, then the median over {args.engines} "
                                       "fresh engines (spread: fastest / slowest - 1); step_ms = elapsed / mean steps "
                                       "per request",
                             "engine": {**synthetic.engine_overrides(), **engine_options(args)}}})
    doc.setdefault("runs", [])
    doc.setdefault("errors", [])
    base = [] if any(e.method == "baseline" for e in plan) else surface_baseline(doc, args.output_dir)
    for engine in plan:
        if engine.label in done:
            continue
        left = args.deadline_s - (time.perf_counter() - started)
        if left < ENGINE_START_ALLOWANCE_S * args.engines:
            log(f"speclab: deadline: {engine.label} not started ({left:.0f} s left)")
            doc.setdefault("not_run", []).append(engine.label)
            continue
        try:
            per_engine = []
            for _ in range(args.engines):  # fresh engines, each gone from the GPU before the next starts
                per_engine.append(measure_engine(profile, engine, args.batches, args.prompt_len, args.output_len,
                                                 {1: 3}, engine_options(args), log))
                wait_gpu_free()
            doc["runs"] = [r for r in doc["runs"] if r["label"] != engine.label] + median_rows(per_engine)
            doc["not_run"] = [x for x in doc.get("not_run", []) if x != engine.label]
        except Exception as err:  # one engine failing (e.g. a version's refusal) must not lose the rest
            message = f"{type(err).__name__}: {str(err).strip().splitlines()[-1] if str(err).strip() else ''}"
            log(f"speclab: {engine.label} FAILED: {message}")
            doc["errors"] = ([e for e in doc["errors"] if e["label"] != engine.label]
                             + [{"label": engine.label, "error": message[:600]}])
        freed = wait_gpu_free()
        doc["environment"] = versions(ask_torch=False)
        use_baseline(doc, base)
        with_speedups(doc["runs"])
        write_json(path, doc)
        if args.copy_to:
            Path(args.copy_to).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(args.copy_to) / path.name)
        log(f"speclab: wrote {path} ({len(doc['runs'])} rows; GPU memory free after {freed:.1f} s)")
    return doc


def engine_options(args) -> dict:
    opts = {"max_model_len": args.max_model_len, "max_num_seqs": max(args.batches), "seed": 0}
    if args.enforce_eager:
        opts["enforce_eager"] = True
    return opts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m speclab.measure.gpu_sweep", description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="speedup_surface,methods,tp2", help="comma-separated: " + ", ".join(PLANS))
    p.add_argument("--output-dir", default=str(synthetic.REFERENCE_DIR))
    p.add_argument("--batches", default="1,16,64", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--deadline-s", type=float, default=float("inf"), help="start no engine after this many seconds")
    p.add_argument("--fresh", action="store_true", help="ignore results already in the output files")
    p.add_argument("--engines", type=int, default=3, help="fresh engines per point; the stored timing is their median")
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--copy-to",
                   help="also copy each file here after every engine (e.g. a folder that outlives a time limit)")
    args = p.parse_args(argv)
    exit_on_sigterm()
    started = time.perf_counter()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # shape folders are local: never ask the Hub
    profile = PROFILES["gpu-synthetic"]
    try:
        synthetic.require_support()
        for name in args.parts.split(","):
            if name not in PLANS:
                raise SpeclabError(f"unknown part {name!r}: choose from {', '.join(PLANS)}")
            run_part(name, profile, args, started)
    except SpeclabError as err:
        print(f"speclab: {err}", file=sys.stderr)
        return 2
    print(f"speclab: sweep done in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
