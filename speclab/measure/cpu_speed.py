"""CPU speed, baseline against speculation, one request at a time and batched.

``python -m speclab.measure.cpu_speed`` prints output tokens per second for the ``cpu-tiny`` profile:

- **batch 1**: the prompts one after another, each waiting for the last (a learner's single request),
  over every prompt and over each category's;
- **batched**: the same prompts in one call (a server's many requests).

Speculation spends spare compute to save target steps, so it pays most at batch 1 and least when
the batch already keeps the cores busy. Every method runs at each ``--k``; every method, the baseline
included, runs on ``--engines`` fresh engines (a fresh engine moves throughput by several percent) and
the table shows medians, measured side by side in one process. ``--layouts`` chooses where the engine
runs: inside this process, as in the lessons (``in-process``, the default), or in vLLM's own EngineCore
and worker processes (``multiprocess``, what scripts and servers get). ``--reserved-cpus 1,0`` repeats it
all with vLLM's scheduler core reserved (vLLM's own default on x86, ``VLLM_CPU_NUM_OF_RESERVED_CPU``)
and with every core computing (speclab's default on a 2-core machine, ``speclab.vllm_layer.engine.cpu_environment``);
``default`` leaves the choice to speclab.

Where a step's time goes (plain, the speculative path with no drafts, per draft token) is
``python -m speclab.measure.step_time``.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from ..errors import SpeclabError
from ..files import write_json
from ..models.profiles import DEFAULT_CPU_PROFILE, Profile, get_profile
from ..vllm_layer import configs
from ..vllm_layer.engine import (IN_PROCESS_ENV, RESERVED_CPUS_ENV, add_enforce_eager_flag, checked_runs, environment,
                                 exit_on_sigterm)
from . import bench, metrics

METHODS = ("ngram", "eagle3")
# Where the engine runs: inside this process (the lessons' layout, ``engine.IN_PROCESS_ENV``) or in vLLM's
# own EngineCore and worker processes (vLLM's default, what scripts and servers get).
LAYOUTS = {"in-process": "1", "multiprocess": "0"}
ALL = "all"  # the row over every prompt


def method_config(profile: Profile, method: str, k: int) -> dict | None:
    """The speculative config a row measures (None: the baseline)."""
    if method == "baseline":
        return None
    if method == "ngram":
        return configs.ngram(k, 5, 2)  # lesson 02's window
    return configs.for_profile(profile, method, k)


def method_configs(profile: Profile, methods: list[str], k_values: list[int]) -> dict[str, dict | None]:
    """The baseline, then every method at every k -> {label: config}."""
    return {"baseline": None, **{f"{m} k={k}": method_config(profile, m, k) for m in methods for k in k_values}}


def by_mode(categories: list[str], alone: list[bench.RunStats], together: bench.RunStats) -> dict:
    """One engine's runs -> {(mode, prompts): RunStats}: batch 1 over every prompt and over each category's
    (the prompts' categories in order, one per run), batched over every prompt."""
    out = {("batch 1", ALL): bench.combine(alone)}
    if len(set(categories)) > 1:
        for category in dict.fromkeys(categories):
            out[("batch 1", category)] = bench.combine([r for c, r in zip(categories, alone) if c == category])
    out[("batched", ALL)] = together
    return out


def summarise(setting: dict, per_engine: dict[str, list[dict]]) -> list[dict]:
    """{label: one ``by_mode`` dict per fresh engine} -> one row per (mode, prompts, label): the median
    tokens/s, every engine's beside it, and the speedup against the baseline's median there."""
    rows = []
    for key in per_engine["baseline"][0]:
        base = statistics.median(e[key].output_tokens_per_s for e in per_engine["baseline"])
        for label, engines in per_engine.items():
            speeds = [e[key].output_tokens_per_s for e in engines]
            counters = engines[0][key].counters
            rows.append({**setting, "method": label, "mode": key[0], "prompts": key[1],
                         "num_prompts": engines[0][key].num_prompts, "tokens_per_s": statistics.median(speeds),
                         "tokens_per_s_each": speeds, "speedup": metrics.speedup(statistics.median(speeds), base),
                         "acceptance_length": counters.acceptance_length if label != "baseline" else None})
    return rows


def run(profile: Profile, methods: list[str], k_values: list[int], layouts: list[str], reserved: list[str],
        engines: int, categories: list[str], per_category: int, output_len: int, enforce_eager: bool | None,
        log=print) -> list[dict]:
    """Every (layout, reserved cores, method, k) on ``engines`` fresh engines -> rows of medians.

    Every config is checked against the target before the first engine starts."""
    chosen = method_configs(profile, methods, k_values)
    chosen = checked_runs(profile, chosen)
    prompts, inputs = bench.prompt_inputs(profile, "workloads", category=categories, per_category=per_category)
    sampling = bench.greedy(output_len)
    prompt_categories = [p.category for p in prompts]
    rows = []
    for layout in layouts:
        for setting in reserved:
            with environment({IN_PROCESS_ENV: LAYOUTS[layout],
                              RESERVED_CPUS_ENV: None if setting == "default" else setting}):
                per_engine = {}
                for label, config in chosen.items():
                    for i in range(engines):
                        log(f"{layout}, reserved cpus {setting}, {label}, engine {i + 1}/{engines} ...")
                        runs = bench.alone_and_together(profile, config, inputs, sampling, enforce_eager)
                        per_engine.setdefault(label, []).append(by_mode(prompt_categories, *runs))
            rows += summarise({"layout": layout, "reserved_cpus": setting}, per_engine)
    return rows


def table(rows: list[dict]) -> str:
    head = (f"{'layout':12s}  {'reserved':>8s}  {'mode':8s}  {'prompts':17s}  {'method':10s}  {'tok/s':>7s}  "
            f"{'speedup':>7s}  {'acc.len':>7s}  each engine")
    lines = [head]
    for r in rows:
        acc = "-" if r["acceptance_length"] is None else f"{r['acceptance_length']:.2f}"
        each = " ".join(f"{s:.1f}" for s in r["tokens_per_s_each"])
        prompts = f"{r['prompts']} ({r['num_prompts']})"
        lines.append(f"{r['layout']:12s}  {r['reserved_cpus']:>8s}  {r['mode']:8s}  {prompts:17s}  {r['method']:10s}  "
                     f"{r['tokens_per_s']:7.1f}  {r['speedup']:6.2f}x  {acc:>7s}  {each}")
    return "\n".join(lines)


def comma_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parse_k(text: str, at_least: int = 1) -> list[int]:
    """``--k``'s comma-separated values: at least ``at_least`` of them, all different whole numbers >= 1."""
    given = comma_list(text)
    ks = [int(x) for x in given if x.isdigit() and int(x) > 0]
    if len(given) < at_least or len(set(ks)) != len(given):  # all valid and all different
        need = "two or more different whole numbers" if at_least > 1 else "different whole numbers"
        raise SpeclabError(f"--k takes {need} >= 1, comma-separated, got {text!r}")
    return ks


def add_workload_flags(parser) -> None:
    """The prompts, engines and compile mode a CPU or step benchmark measures (``check_workload_flags``)."""
    parser.add_argument("--engines", type=int, default=2, help="fresh engines per config")
    parser.add_argument("--categories", default="summarisation,code")
    parser.add_argument("--prompts-per-category", type=int, default=4)
    parser.add_argument("--output-len", type=int, default=96)
    add_enforce_eager_flag(parser)


def check_workload_flags(args) -> None:
    if args.engines < 1 or args.prompts_per_category < 1 or args.output_len < 1:
        raise SpeclabError("--engines, --prompts-per-category and --output-len must be at least 1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speclab.measure.cpu_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated, besides the baseline")
    parser.add_argument("--k", default="3,5", help="comma-separated speculative tokens per step, every method at each")
    parser.add_argument("--layouts", default="in-process",
                        help=f"comma-separated, from {', '.join(LAYOUTS)}: the engine inside this process (the "
                             "lessons' layout) or in vLLM's own processes (scripts' and servers')")
    parser.add_argument("--reserved-cpus", default="default",
                        help="comma-separated VLLM_CPU_NUM_OF_RESERVED_CPU values to compare ('default': speclab's "
                             "choice)")
    add_workload_flags(parser)
    parser.add_argument("--json", default=None, help="write the rows to this file")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    try:
        methods, layouts, reserved = comma_list(args.methods), comma_list(args.layouts), comma_list(args.reserved_cpus)
        for m in methods:
            if m not in configs.METHODS:
                raise SpeclabError(f"unknown method {m!r}: choose from {', '.join(configs.METHODS)}")
        for layout in layouts:
            if layout not in LAYOUTS:
                raise SpeclabError(f"unknown layout {layout!r}: choose from {', '.join(LAYOUTS)}")
        for r in reserved:
            if r != "default" and not r.isdigit():
                raise SpeclabError(f"--reserved-cpus takes whole numbers or 'default', got {r!r}")
        check_workload_flags(args)
        ks = parse_k(args.k)
        log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        rows = run(get_profile(DEFAULT_CPU_PROFILE), methods, ks, layouts, reserved, args.engines,
                   comma_list(args.categories), args.prompts_per_category, args.output_len, args.enforce_eager, log=log)
    except SpeclabError as err:
        print(f"speclab: error: {err}", file=sys.stderr)
        return 2
    print(table(rows))
    if args.json:
        write_json(args.json, {"profile": DEFAULT_CPU_PROFILE, "k_values": ks, "output_len": args.output_len,
                               "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
