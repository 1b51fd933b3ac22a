"""CPU speed, baseline against speculation, one request at a time and batched.

``python -m speclab.cpu_speed`` prints output tokens per second for the ``cpu-tiny`` profile:

- **batch 1**: the prompts one after another, each waiting for the last (a learner's single request);
- **batched**: the same prompts in one call (a server's many requests).

Speculation spends spare compute to save target steps, so it pays most at batch 1 and least when
the batch already keeps the cores busy. Every method, the baseline included, runs on ``--engines``
fresh engines (a fresh engine moves throughput by several percent) and the table shows medians,
measured side by side in one process. ``--reserved-cpus 1,0`` repeats it all with vLLM's scheduler
core reserved (vLLM's own default on x86, ``VLLM_CPU_NUM_OF_RESERVED_CPU``) and with every core
computing (speclab's default on a 2-core machine, ``speclab.engine.cpu_environment``); ``default``
leaves the choice to speclab.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from . import bench, configs, metrics
from .engine import RESERVED_CPUS_ENV, open_engine, resolve_drafter
from .models import resolve_model
from .profiles import DEFAULT_CPU_PROFILE, SpeclabError, get_profile
from .report import write_json

METHODS = ("ngram", "eagle3")
MODES = ("batch 1", "batched")


def method_config(profile: str, method: str, k: int) -> dict | None:
    """The speculative config a row measures (None: the baseline)."""
    if method == "baseline":
        return None
    if method == "ngram":
        return configs.ngram(k, 5, 2)  # lesson 02's window
    return configs.for_profile(profile, method, k)


def measure_engine(profile: str, config: dict | None, inputs: list, sampling, enforce_eager: bool) -> dict:
    """One fresh engine: every prompt alone, then all at once -> {mode: (tokens/s, counters)}."""
    with open_engine(profile, config, enforce_eager=enforce_eager) as llm:
        bench.warm_up(llm, sampling, inputs[0])
        alone = [bench.measure(llm, [one], sampling) for one in inputs]
        together = bench.measure(llm, inputs, sampling)
    tokens, seconds = sum(r.output_tokens for r in alone), sum(r.elapsed_s for r in alone)
    counters = sum((r.counters for r in alone), metrics.SpecCounters())
    return {"batch 1": (metrics.tokens_per_second(tokens, seconds), counters),
            "batched": (together.output_tokens_per_s, together.counters)}


def run(profile: str, methods: list[str], k: int, reserved: list[str], engines: int, categories: list[str],
        per_category: int, output_len: int, enforce_eager: bool, log=print) -> list[dict]:
    """Every (reserved cores, method) on ``engines`` fresh engines -> one row per mode with medians.

    Every config is checked against the target before the first engine starts."""
    chosen = {m: method_config(profile, m, k) for m in ["baseline", *methods]}
    target = resolve_model(get_profile(profile).target)
    for config in chosen.values():
        configs.validate(resolve_drafter(config), target=target)
    prompts, inputs = bench.prompt_inputs(profile, "workloads", category=categories,
                                         num_prompts=per_category * len(categories))
    sampling = bench.greedy(output_len)
    saved = os.environ.get(RESERVED_CPUS_ENV)
    rows = []
    try:
        for setting in reserved:
            if setting == "default":
                os.environ.pop(RESERVED_CPUS_ENV, None)
            else:
                os.environ[RESERVED_CPUS_ENV] = setting
            for method, config in chosen.items():
                runs = []
                for i in range(engines):
                    log(f"reserved cpus {setting}, {method}, engine {i + 1}/{engines} ...")
                    runs.append(measure_engine(profile, config, inputs, sampling, enforce_eager))
                for mode in MODES:
                    speeds = [r[mode][0] for r in runs]
                    rows.append({"reserved_cpus": setting, "method": method, "mode": mode, "prompts": len(inputs),
                                 "tokens_per_s": statistics.median(speeds), "tokens_per_s_each": speeds,
                                 "acceptance_length": runs[0][mode][1].acceptance_length if config else None})
    finally:
        if saved is None:
            os.environ.pop(RESERVED_CPUS_ENV, None)
        else:
            os.environ[RESERVED_CPUS_ENV] = saved
    for row in rows:
        base = next(r for r in rows if r["reserved_cpus"] == row["reserved_cpus"] and r["mode"] == row["mode"]
                    and r["method"] == "baseline")
        row["speedup"] = metrics.speedup(row["tokens_per_s"], base["tokens_per_s"])
    return rows


def table(rows: list[dict]) -> str:
    head = f"{'reserved':>8s}  {'method':8s}  {'mode':8s}  {'tok/s':>7s}  {'speedup':>7s}  {'acc.len':>7s}  each engine"
    lines = [head]
    for r in rows:
        acc = "-" if r["acceptance_length"] is None else f"{r['acceptance_length']:.2f}"
        each = " ".join(f"{s:.1f}" for s in r["tokens_per_s_each"])
        lines.append(f"{r['reserved_cpus']:>8s}  {r['method']:8s}  {r['mode']:8s}  {r['tokens_per_s']:7.1f}  "
                     f"{r['speedup']:6.2f}x  {acc:>7s}  {each}")
    return "\n".join(lines)


def _list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speclab.cpu_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated, besides the baseline")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--reserved-cpus", default="default",
                        help="comma-separated VLLM_CPU_NUM_OF_RESERVED_CPU values to compare ('default': speclab's choice)")
    parser.add_argument("--engines", type=int, default=2, help="fresh engines per method and setting")
    parser.add_argument("--categories", default="summarisation,code")
    parser.add_argument("--prompts-per-category", type=int, default=4)
    parser.add_argument("--output-len", type=int, default=96)
    parser.add_argument("--enforce-eager", action="store_true", help="skip torch.compile (faster start, slower run)")
    parser.add_argument("--json", default=None, help="write the rows to this file")
    args = parser.parse_args(argv)
    try:
        methods, reserved = _list(args.methods), _list(args.reserved_cpus)
        for m in methods:
            if m not in configs.METHODS:
                raise SpeclabError(f"unknown method {m!r}: choose from {', '.join(configs.METHODS)}")
        for r in reserved:
            if r != "default" and not r.isdigit():
                raise SpeclabError(f"--reserved-cpus takes whole numbers or 'default', got {r!r}")
        if args.engines < 1 or args.k < 1 or args.prompts_per_category < 1 or args.output_len < 1:
            raise SpeclabError("--engines, --k, --prompts-per-category and --output-len must be at least 1")
        rows = run(DEFAULT_CPU_PROFILE, methods, args.k, reserved, args.engines, _list(args.categories),
                   args.prompts_per_category, args.output_len, args.enforce_eager,
                   log=lambda m: print(m, file=sys.stderr, flush=True))
    except SpeclabError as err:
        print(f"speclab: error: {err}", file=sys.stderr)
        return 2
    print(table(rows))
    if args.json:
        write_json(args.json, {"profile": DEFAULT_CPU_PROFILE, "k": args.k, "output_len": args.output_len,
                               "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
