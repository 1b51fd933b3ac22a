"""Where a speculative step's time goes: ``python -m speclab.measure.step_time --profile gpu-tiny``.

On a GPU with SmolLM2, n-gram accepted 2.75 tokens per drafting step and still ran at a third to a half
of the baseline's speed. The missing piece is what a step costs. This benchmark times an engine
*step* (elapsed / steps; a step is one target forward that emits 1 + accepted tokens per request),
one request at a time and batched, for:

- **plain** decoding (what the baseline runs);
- on a GPU, **plain, as n-gram runs**: plain decoding on the model runner and the synchronous
  scheduling that vLLM's n-gram path uses (vLLM 0.26 runs n-gram on its older V1 runner without
  asynchronous scheduling: ``VLLM_USE_V2_MODEL_RUNNER=0``, ``async_scheduling=False``);
- **the n-gram path with every draft switched off** (vLLM's ``num_speculative_tokens_per_batch_size``
  at k=0): the speculative runner, no drafts;
- **n-gram at each** ``--k``, from which it fits ``step = t_fixed + t_draft * (draft tokens per step)``.

A step pays off when it emits more tokens than it costs plain steps: ``cost_in_plain_steps`` gives that
cost for a measured k, drafting or not. Every config runs on ``--engines`` fresh engines and the rows keep
each engine's step.
``stored()`` reads the committed measurements (``data/step_time/<profile>.json``); ``lesson_table`` and
``against`` print them for a lesson.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from ..algorithms import theory
from ..algorithms.counters import SpecCounters
from ..errors import SpeclabError
from ..files import REPO_ROOT, write_json
from ..models import random_weights
from ..models.profiles import DEFAULT_CPU_PROFILE, PROFILES, Profile, get_profile
from ..vllm_layer import configs
from ..vllm_layer.engine import IN_PROCESS_ENV, checked_runs, environment, exit_on_sigterm
from ..vllm_layer.envcheck import device_name, versions
from . import bench, metrics
from .cpu_speed import add_workload_flags, check_workload_flags, comma_list, parse_k

STORED = REPO_ROOT / "data" / "step_time"
PLAIN = "plain"
AS_NGRAM_RUNS = "plain, as n-gram runs"
NO_DRAFTS = "ngram, k=0 always"
# What vLLM 0.26 gives n-gram on a GPU: the V1 model runner, no asynchronous scheduling (vllm/config/vllm.py)
AS_NGRAM_SETTINGS = ({"VLLM_USE_V2_MODEL_RUNNER": "0"}, {"async_scheduling": False})


def step_configs(k_values: list[int], gpu: bool) -> dict[str, dict | None]:
    """Plain decoding; on a GPU plain decoding the way n-gram runs; the n-gram path with every draft switched
    off; n-gram at each k (lesson 02's window)."""
    off = {**configs.ngram(max(k_values), 5, 2), "num_speculative_tokens_per_batch_size": [[1, 1, 0]]}
    plain = {PLAIN: None, **({AS_NGRAM_RUNS: None} if gpu else {})}
    return {**plain, NO_DRAFTS: off, **{f"ngram k={k}": configs.ngram(k, 5, 2) for k in k_values}}


def engine_settings(label: str) -> tuple[dict, dict]:
    """(environment variables, engine overrides) a config's engine opens with."""
    return AS_NGRAM_SETTINGS if label == AS_NGRAM_RUNS else ({}, {})


def step_row(label: str, output_tokens: int, elapsed_s: float, counters: SpecCounters, batch: int = 1) -> dict:
    """Prompts run ``batch`` at a time -> step figures. A step emits 1 + accepted tokens per request, so a
    request takes (its tokens - its accepted) steps; with a batch, ``step_ms`` is over the mean request's steps."""
    steps = (output_tokens - counters.num_accepted_tokens) / batch
    if steps <= 0 or elapsed_s <= 0:
        raise SpeclabError(f"{label}: no steps measured ({output_tokens} tokens in {elapsed_s:.3f} s)")
    per_request = output_tokens / batch
    return {"config": label, "mode": "batch 1" if batch == 1 else f"batch {batch}", "steps": steps,
            "step_ms": 1000 * elapsed_s / steps, "tokens_per_step": per_request / steps,
            "draft_tokens_per_step": counters.num_draft_tokens / batch / steps,
            "drafted_share": counters.num_drafts / batch / steps,
            "tokens_per_s": metrics.tokens_per_second(output_tokens, elapsed_s)}


def measure_steps(profile: Profile, label: str, config: dict | None, inputs: list, sampling,
                  enforce_eager: bool | None) -> list[dict]:
    """One fresh engine -> a step row for the prompts one at a time and one for all of them at once."""
    env, overrides = engine_settings(label)
    with environment(env):
        runs, together = bench.alone_and_together(profile, config, inputs, sampling, enforce_eager, **overrides)
    alone = bench.combine(runs)
    return [step_row(label, alone.output_tokens, alone.elapsed_s, alone.counters),
            step_row(label, together.output_tokens, together.elapsed_s, together.counters, batch=len(inputs))]


def median_step_rows(per_engine: list[dict]) -> dict:
    """The same config on several fresh engines -> the median of each figure, every engine's step beside it."""
    row = {key: statistics.median(r[key] for r in per_engine) if isinstance(value, (int, float)) else value
           for key, value in per_engine[0].items()}
    row["step_ms_each"] = [round(r["step_ms"], 3) for r in per_engine]
    return row


def step_breakdown(rows: list[dict]) -> dict:
    """Per mode: the plain step, the plain step as n-gram runs (where measured), the speculative path with no
    drafts, and the line ``t_fixed + t_draft * draft tokens`` fitted over the n-gram rows."""
    out = {}
    for mode in dict.fromkeys(r["mode"] for r in rows):
        by = {r["config"]: r for r in rows if r["mode"] == mode}
        plain, off = by[PLAIN]["step_ms"], by[NO_DRAFTS]["step_ms"]
        drafted = [r for name, r in by.items() if name.startswith("ngram k=")]
        cost = theory.fit_step_cost([r["draft_tokens_per_step"] for r in drafted], [r["step_ms"] for r in drafted],
                                    plain)
        out[mode] = {"plain_step_ms": plain,
                     "as_ngram_runs_ms": by[AS_NGRAM_RUNS]["step_ms"] if AS_NGRAM_RUNS in by else None,
                     "no_draft_step_ms": off, "runner_overhead_ms": off - plain,
                     "t_fixed_ms": cost.t_fixed, "t_draft_ms": cost.t_draft}
    return out


def cost_in_plain_steps(record: dict, k: int, mode: str = "batch 1") -> float | None:
    """What one step of the n-gram path at k costs, in plain steps, as measured (drafting or not: a step
    that found no match pays the speculative path too); None where k was not measured."""
    rows = {r["config"]: r for r in record["rows"] if r["mode"] == mode}
    row = rows.get(f"ngram k={k}")
    return None if row is None else row["step_ms"] / rows[PLAIN]["step_ms"]


def run_steps(profile: Profile, k_values: list[int], engines: int, categories: list[str], per_category: int,
              output_len: int, enforce_eager: bool | None, log=print) -> list[dict]:
    """Every config on ``engines`` fresh engines, one after another -> median rows, batch 1 first.

    Every config is checked against the target before the first engine starts."""
    chosen = step_configs(k_values, gpu=profile.device != "cpu")
    chosen = checked_runs(profile, chosen)
    _, inputs = bench.prompt_inputs(profile, "workloads", category=categories, per_category=per_category)
    sampling = bench.greedy(output_len)
    rows = []
    for label, config in chosen.items():
        per_engine = []
        for i in range(engines):
            log(f"steps: {label}, engine {i + 1}/{engines} ...")
            per_engine.append(measure_steps(profile, label, config, inputs, sampling, enforce_eager))
        rows += [median_step_rows(list(same_mode)) for same_mode in zip(*per_engine)]
    return sorted(rows, key=lambda r: r["mode"] != "batch 1")  # each mode's rows together, batch 1 first


def step_table(rows: list[dict]) -> str:
    lines = [f"{'mode':8s}  {'config':22s}  {'step ms':>7s}  {'tok/step':>8s}  {'drafts/step':>11s}  {'tok/s':>7s}  "
             "each engine (step ms)"]
    for r in rows:
        lines.append(f"{r['mode']:8s}  {r['config']:22s}  {r['step_ms']:7.2f}  {r['tokens_per_step']:8.2f}  "
                     f"{r['draft_tokens_per_step']:11.2f}  {r['tokens_per_s']:7.1f}  "
                     f"{' '.join(f'{x:.2f}' for x in r['step_ms_each'])}")
    for mode, b in step_breakdown(rows).items():
        older = "" if b["as_ngram_runs_ms"] is None else f" (as n-gram runs: {b['as_ngram_runs_ms']:.2f} ms)"
        lines.append(f"{mode}: plain step {b['plain_step_ms']:.2f} ms{older}; the speculative path with no drafts "
                     f"{b['no_draft_step_ms']:.2f} ms ({b['runner_overhead_ms']:+.2f} ms before any draft); "
                     f"fitted over n-gram: {b['t_fixed_ms']:.2f} ms + {b['t_draft_ms']:.2f} ms per draft token")
    return "\n".join(lines)


# ---------------------------------------------------------------- the stored measurements the lessons read

def record_name(profile_name: str) -> str:
    """The stored file's name: the profile, with ``-random`` where its weights were random."""
    return random_weights.stored_name(profile_name)


def stored(directory: Path = STORED) -> dict[str, dict]:
    """{record name: record} of every committed measurement: CPU first, then SmolLM2 on a GPU, then larger targets."""
    records = {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}
    return dict(sorted(records.items(), key=lambda item: (not item[0].startswith("cpu"), "random" in item[0], item[0])))


def lesson_table(records: dict[str, dict], k: int, mode: str = "batch 1") -> str:
    """One line per stored measurement: the plain step, plain as n-gram runs, the speculative path with no
    drafts, n-gram's step at each measured k, and what a step at ``k`` costs in plain steps."""
    measured = sorted({kk for record in records.values() for kk in record["k_values"]})
    lines = [f"{'target':32s}{'plain':>9s}{'as n-gram runs':>16s}{'no drafts':>11s}"
             + "".join(f"{'k=' + str(kk):>10s}" for kk in measured) + f"{'a k=' + str(k) + ' step':>18s}  measured on"]
    for record in records.values():
        b = record["breakdown"][mode]
        steps = {r["config"]: r["step_ms"] for r in record["rows"] if r["mode"] == mode}
        older = "-" if b["as_ngram_runs_ms"] is None else f"{b['as_ngram_runs_ms']:.2f} ms"
        target = record["model"].split("/")[-1] + (" (random)" if record.get("weights") else "")
        cost = cost_in_plain_steps(record, k, mode)
        lines.append(f"{target:32s}{b['plain_step_ms']:6.2f} ms{older:>16s}{b['no_draft_step_ms']:8.2f} ms"
                     + "".join(f"{steps[f'ngram k={kk}']:7.2f} ms" if f"ngram k={kk}" in steps else f"{'-':>10s}"
                               for kk in measured)
                     + (f"{cost:6.2f} plain steps" if cost is not None else f"{'not measured':>18s}")
                     + f"  {record['hardware']}")
    return "\n".join(lines)


def predict(records: dict[str, dict], profile_name: str, k: int, runs: dict) -> dict[str, dict] | None:
    """n-gram's speedup per category predicted from this profile's stored step cost; None where it has none.

    ``runs``: {category: an n-gram run (``output_tokens``, ``elapsed_s``, ``counters``)}. An n-gram step at
    k costs the same whether it found a match or not (``cost_in_plain_steps``), so what decides the speedup
    is the tokens a step emits over *every* step: vLLM's acceptance length averages over the steps that
    drafted only, and a step that found no match emits one token. Predicted speedup = tokens a step / cost."""
    record = records.get(record_name(profile_name))
    cost = None if record is None else cost_in_plain_steps(record, k)
    if cost is None:
        return None
    out = {}
    for category, run in runs.items():
        row = step_row(category, run.output_tokens, run.elapsed_s, run.counters)
        out[category] = {"acceptance_length": run.counters.acceptance_length, "drafted_share": row["drafted_share"],
                         "tokens_per_step": row["tokens_per_step"], "step_cost": cost,
                         "predicted_speedup": row["tokens_per_step"] / cost}
    return out


def elsewhere(measured_on: str, profile_name: str, name: str) -> list[str]:
    """A line for a prediction made from another machine's step costs: a CPU's vector units (AVX2 against
    AVX-512) or another card change what verifying k+1 tokens costs against one, so the two can part."""
    here = device_name()
    if re.sub(r"\b1 x ", "", measured_on) == here:
        return []
    return [f"  the step costs were measured on {measured_on}; this machine is {here}, so the prediction can "
            f"miss here: measure this machine's with python -m speclab.measure.step_time --profile {profile_name} "
            f"--json data/step_time/{name}.json"]


def against(records: dict[str, dict], profile_name: str, k: int, runs: dict,
            measured: dict[str, float] | None = None) -> str:
    """``predict`` as a table for a lesson, the measured speedups beside it; what to run where nothing is stored."""
    name = record_name(profile_name)
    if name not in records:
        return f"no stored step-time measurement for {name}: " \
               f"python -m speclab.measure.step_time --profile {profile_name} --json " \
               f"data/step_time/{name}.json"
    predicted = predict(records, profile_name, k, runs)
    if predicted is None:
        return f"{name}: n-gram was measured at k = {', '.join(map(str, records[name]['k_values']))}, not at k={k}"
    cost = cost_in_plain_steps(records[name], k)
    lines = [f"{name}: an n-gram step at k={k} costs {cost:.2f} plain steps, drafting or not; a category pays where "
             "its steps emit more tokens than that",
             *elsewhere(records[name]["hardware"], profile_name, name),
             f"  {'category':15s}{'acceptance length':>18s}{'steps drafting':>16s}{'tokens a step':>15s}"
             f"{'predicted':>11s}" + (f"{'measured':>10s}" if measured else "")]
    for category, p in predicted.items():
        lines.append(f"  {category:15s}{p['acceptance_length']:18.2f}{p['drafted_share']:15.0%} "
                     f"{p['tokens_per_step']:14.2f}{p['predicted_speedup']:10.2f}x"
                     + (f"{measured[category]:9.2f}x" if measured else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speclab.measure.step_time", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default=DEFAULT_CPU_PROFILE, help=f"one of {', '.join(PROFILES)}")
    parser.add_argument("--k", default="1,3,5", help="comma-separated n-gram k to fit the draft cost over")
    add_workload_flags(parser)
    parser.add_argument("--hardware", default=None, help="what the record says it ran on (default: from the machine)")
    parser.add_argument("--json", default=None, help="write the rows and the breakdown to this file")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    try:
        prof = get_profile(args.profile)
        random_weights.check_profile(prof)
        check_workload_flags(args)
        ks = parse_k(args.k, at_least=2)
        log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        with environment({IN_PROCESS_ENV: "1"} if prof.device == "cpu" else {}):  # the lessons' CPU layout
            rows = run_steps(prof, ks, args.engines, comma_list(args.categories), args.prompts_per_category,
                             args.output_len, args.enforce_eager, log=log)
    except SpeclabError as err:
        print(f"speclab: error: {err}", file=sys.stderr)
        return 2
    print(step_table(rows))
    if args.json:
        env = versions()
        write_json(args.json, {
            "profile": prof.name, "model": prof.target.removeprefix("local:"), "weights": random_weights.label(),
            "hardware": args.hardware or device_name(), "environment": env,
            "k_values": ks, "engines": args.engines, "output_len": args.output_len,
            "enforce_eager": args.enforce_eager, "breakdown": step_breakdown(rows), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
