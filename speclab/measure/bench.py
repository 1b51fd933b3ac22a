"""Baseline against speculative decoding on the same prompts: the measurement every lesson makes.

``measure`` runs a prompt set on an open engine and returns a ``RunStats`` (throughput,
latency, the counters of exactly this run). ``compare`` opens a baseline engine and a speculative
engine one after the other (never both at once, so they do not share the machine), measures both
and returns a ``BenchResult`` that prints the benchmark's report and saves itself to JSON and CSV
atomically. ``one_at_a_time`` measures prompts one by one; on a CPU its engines are open together
and take turns, prompt by prompt, so that a change in the machine's load reaches them all alike; on a
GPU each engine times the prompts in three rounds and keeps each prompt's median (``rounds_for``).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

from ..algorithms.counters import SpecCounters
from ..files import write_csv, write_json
from ..models import random_weights
from ..models.model_refs import resolve_model, tokenizer_path
from ..models.profiles import Profile
from ..models.provision import load_tokenizer
from ..vllm_layer import configs
from ..vllm_layer.engine import CPU_KVCACHE_GIB, checked_runs, open_engine
from ..vllm_layer.envcheck import versions
from ..vllm_layer.logs import import_vllm
from ..vllm_layer.vllm_features import has_per_request_spec_metrics
from . import equality, metrics
from .prompts import apply_chat_template, load_prompts


@dataclass
class RunStats:
    """One pass of a prompt set through one engine."""

    label: str
    num_prompts: int
    output_tokens: int
    elapsed_s: float
    counters: SpecCounters
    ttft_s: list[float] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    token_ids: list[list[int]] = field(default_factory=list, repr=False)
    texts: list[str] = field(default_factory=list, repr=False)
    margins: list[list[float]] = field(default_factory=list, repr=False)  # top-two margin per token, if asked for
    engine_start_s: float | None = None

    @property
    def output_tokens_per_s(self) -> float:
        return metrics.tokens_per_second(self.output_tokens, self.elapsed_s)

    @property
    def accepted_tokens_per_s(self) -> float:
        return metrics.tokens_per_second(self.counters.num_accepted_tokens, self.elapsed_s)

    def summary(self) -> dict:
        med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
        return {
            "label": self.label, "num_prompts": self.num_prompts, "output_tokens": self.output_tokens,
            "elapsed_s": round(self.elapsed_s, 4), "output_tokens_per_s": round(self.output_tokens_per_s, 3),
            "accepted_tokens_per_s": round(self.accepted_tokens_per_s, 3),
            "ttft_median_s": med(self.ttft_s), "tpot_median_s": med(self.tpot_s),
            "engine_start_s": self.engine_start_s, **self.counters.summary(),
        }


def _latencies(outputs) -> tuple[list[float], list[float]]:
    """Time to first token and time per output token from vLLM's per-request stats, where present."""
    ttft, tpot = [], []
    for out in outputs:
        stats = getattr(out, "metrics", None)
        if stats is None:
            continue
        first = getattr(stats, "first_token_latency", 0.0)
        if first:
            ttft.append(first)
        n = getattr(stats, "num_generation_tokens", 0)
        t0, t1 = getattr(stats, "first_token_ts", 0.0), getattr(stats, "last_token_ts", 0.0)
        if n > 1 and t1 > t0:
            tpot.append((t1 - t0) / (n - 1))
    return ttft, tpot


def measure(llm, prompts: list, sampling_params, label: str = "run", chat: bool = False) -> RunStats:
    """Run ``prompts`` once on ``llm``; the counters cover this call only.

    They are the difference of two snapshots of the engine's counters, or, for an engine opened with
    ``per_request_spec_decode_metrics``, the sum of this call's requests' own counters: vLLM keeps its
    engine counters in one registry per process, so with several engines open a snapshot reads them all.
    A baseline engine (no speculative config) has none."""
    speculates = getattr(llm, "speclab_speculative_config", True) is not None
    per_request = getattr(llm, "speclab_per_request_counters", False)
    before = metrics.snapshot(llm) if speculates and not per_request else None
    started = time.perf_counter()
    if chat:
        outputs = llm.chat(prompts, sampling_params=sampling_params, use_tqdm=False)
    else:
        outputs = llm.generate(prompts, sampling_params=sampling_params, use_tqdm=False)
    elapsed = time.perf_counter() - started
    if before is not None:
        counters = metrics.snapshot(llm) - before
    else:
        counters = sum((metrics.from_request(getattr(o.outputs[0], "spec_decode_metrics", None)) for o in outputs),
                       SpecCounters())
    ttft, tpot = _latencies(outputs)
    return RunStats(
        label=label, num_prompts=len(prompts), elapsed_s=elapsed, counters=counters,
        output_tokens=sum(len(o.outputs[0].token_ids) for o in outputs),
        ttft_s=ttft, tpot_s=tpot,
        token_ids=[list(o.outputs[0].token_ids) for o in outputs],
        texts=[o.outputs[0].text for o in outputs],
        margins=[equality.top_two_margins(o.outputs[0]) for o in outputs],
        engine_start_s=getattr(llm, "speclab_start_seconds", None),
    )


def warm_up(llm, sampling_params, prompt) -> None:
    """One request with the timed runs' settings, so that one-time costs are not billed to the first run.

    A short plain request is not enough: on a 2-core CPU machine (AVX-512, eager) a process's first request
    with logprobs paid about 9 s once, so the first engine of a lesson, the baseline, measured 105 tok/s
    after a 4-token warm-up and about 1,350 after a full-length one (tiny MTP model, 8 prompts, 128 tokens),
    and every speedup against it looked several times too good.
    """
    llm.generate([prompt], sampling_params, use_tqdm=False)  # the same settings: logprobs included


@dataclass
class BenchResult:
    """A baseline and a speculative run of the same prompts, with the settings that produced them."""

    profile: str
    target: str
    method: str
    k: int
    speculative_config: dict
    temperature: float
    output_len: int
    dataset: str
    speculative: RunStats
    baseline: RunStats | None = None
    environment: dict = field(default_factory=dict)
    weights: str | None = field(default_factory=random_weights.label)  # None: real weights

    @property
    def speedup(self) -> float | None:
        if self.baseline is None or self.baseline.output_tokens_per_s <= 0:
            return None
        return metrics.speedup(self.speculative.output_tokens_per_s, self.baseline.output_tokens_per_s)

    @property
    def impossible(self) -> str | None:
        """Why the speedup cannot be right (``metrics.impossible_speedup``), or None."""
        if self.speedup is None:
            return None
        return metrics.impossible_speedup(self.speedup, self.speculative.counters.acceptance_length)

    @cached_property  # report(), to_dict() and table() each read it more than once
    def greedy_check(self) -> equality.GreedyCheck | None:
        """Greedy runs must agree up to rounding at near-ties; sampled runs are not expected to."""
        if self.baseline is None or self.temperature != 0:
            return None
        return equality.check_runs(self.baseline, self.speculative)

    @property
    def outputs_identical(self) -> bool | None:
        """True when every greedy output matched the baseline's token for token."""
        check = self.greedy_check
        return None if check is None else check.identical == check.num_prompts

    @property
    def mismatched_prompts(self) -> list[int]:
        check = self.greedy_check
        return [] if check is None else [d.prompt for d in check.divergences]

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("speculative", "baseline")}
        d["speculative"] = self.speculative.summary()
        d["baseline"] = self.baseline.summary() if self.baseline else None
        d["speedup"] = self.speedup
        d["speedup_impossible"] = self.impossible
        d["outputs_identical"] = self.outputs_identical
        d["greedy_check"] = self.greedy_check.summary() if self.greedy_check else None
        d["mismatched_prompts"] = self.mismatched_prompts
        return d

    def rows(self) -> list[dict]:
        """Flat rows for CSV: one per run."""
        common = {"profile": self.profile, "method": self.method, "k": self.k, "temperature": self.temperature,
                  "output_len": self.output_len, "dataset": self.dataset}
        runs = [r for r in (self.baseline, self.speculative) if r is not None]
        return [{**common, **{k: v for k, v in r.summary().items() if k != "per_position_rates"},
                 "per_position_rates": r.counters.per_position_rates, "speedup": self.speedup} for r in runs]

    def save_json(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict())

    def save_csv(self, path: str | Path) -> Path:
        return write_csv(path, self.rows())

    def report(self) -> str:
        """The seed benchmark's report, followed by what it leaves out: the baseline and the speedup."""
        c, s = self.speculative.counters, self.speculative
        lines = ([f"({self.weights})"] if self.weights else []) + ["-" * 50,
                 f"total_num_output_tokens: {s.output_tokens}",
                 f"num_drafts: {c.num_drafts}",
                 f"num_draft_tokens: {c.num_draft_tokens}",
                 f"num_accepted_tokens: {c.num_accepted_tokens}",
                 f"mean acceptance length: {c.acceptance_length:.2f}",
                 "-" * 50]
        rates = c.per_position_rates or [0.0] * self.k
        lines += [f"acceptance at token {i}: {r:.2f}" for i, r in enumerate(rates)]
        lines += ["-" * 50,
                  f"draft acceptance rate: {c.draft_acceptance_rate:.1%}",
                  f"{self.method} (k={self.k}): {s.output_tokens_per_s:.1f} output tok/s "
                  f"({s.output_tokens} tokens in {s.elapsed_s:.2f} s)"]
        if self.baseline is not None:
            b = self.baseline
            lines += [f"baseline: {b.output_tokens_per_s:.1f} output tok/s ({b.output_tokens} tokens in "
                      f"{b.elapsed_s:.2f} s)",
                      f"speedup: {self.speedup:.2f}x" + (f" (NOT TRUSTED: {self.impossible})" if self.impossible
                                                        else ""),
                      f"greedy outputs: {self.greedy_check.describe()}" if self.greedy_check
                      else "outputs not compared (temperature > 0: sampled outputs differ by design)"]
        if s.ttft_s:
            lines.append(f"median TTFT {statistics.median(s.ttft_s) * 1000:.1f} ms, "
                         f"median TPOT {statistics.median(s.tpot_s) * 1000 if s.tpot_s else float('nan'):.1f} ms")
        return "\n".join(lines)


def run_one(profile: Profile, config: dict | None, inputs: list, sampling_params, label: str,
            chat: bool = False, **engine_overrides) -> tuple[RunStats, str]:
    """Open an engine for one config, warm it up, measure, close it. Returns (stats, target path)."""
    with open_engine(profile, config, **engine_overrides) as llm:
        warm_up(llm, sampling_params, inputs[0])
        stats = measure(llm, inputs, sampling_params, label=label, chat=chat)
        return stats, llm.llm_engine.model_config.model


def sweep(profile: Profile, speculative_configs: list[dict], inputs: list, sampling_params,
          *, baseline: bool | RunStats = True, chat: bool = False, dataset: str = "", log=None,
          **engine_overrides) -> list[BenchResult]:
    """One baseline run (or a given one) and one run per speculative config, one engine at a time.

    Every result shares the same baseline, so speedups within a sweep are measured side by side.
    """
    speculative_configs = list(checked_runs(profile, dict(enumerate(speculative_configs)), **engine_overrides).values())
    base = baseline if isinstance(baseline, RunStats) else None
    target = profile.target
    if baseline is True:
        log and log("baseline ...")
        base, target = run_one(profile, None, inputs, sampling_params, "baseline", chat, **engine_overrides)
    results = []
    for config in speculative_configs:
        label = f"{config['method']} k={config['num_speculative_tokens']}"
        log and log(f"{label} ...")
        stats, target = run_one(profile, config, inputs, sampling_params, label, chat, **engine_overrides)
        results.append(_result(profile, target, config, stats, base, sampling_params, dataset))
    return results


def _result(profile: Profile, target: str, config: dict, stats: RunStats, base: RunStats | None,
            sampling_params, dataset: str) -> BenchResult:
    return BenchResult(
        profile=profile.name, target=target, method=config["method"], k=config["num_speculative_tokens"],
        speculative_config=config, temperature=float(getattr(sampling_params, "temperature", 0.0)),
        output_len=int(getattr(sampling_params, "max_tokens", 0) or 0), dataset=dataset,
        speculative=stats, baseline=base, environment=versions())


def sweep_from_grid(profile: Profile, results: dict[str, dict[str, RunStats]],
                    speculative_configs: dict[str, dict], group: str, sampling_params, *, dataset: str = "",
                    baseline: str = "baseline") -> list[BenchResult]:
    """One group of a ``grid`` read as a ``sweep``: one result per config, all against the same baseline.

    Lesson 07 measures its k sweep and its temperature sweep on the same engines this way.
    """
    target = resolve_model(profile.target)
    return [_result(profile, target, config, results[label][group], results[baseline][group], sampling_params, dataset)
            for label, config in speculative_configs.items()]


def compare(profile: Profile, speculative_config: dict, inputs: list, sampling_params,
            *, baseline: bool = True, chat: bool = False, dataset: str = "", **engine_overrides) -> BenchResult:
    """Measure the same prompts without and with speculation, one engine at a time."""
    return sweep(profile, [speculative_config], inputs, sampling_params, baseline=baseline, chat=chat,
                 dataset=dataset, **engine_overrides)[0]


def prompt_inputs(profile: Profile, source: str = "mtbench_style", category=None,
                  num_prompts: int | None = None, model: str | None = None, per_category: int | None = None):
    """Load a prompt set (``load_prompts``'s selection) and render it with the chat template of the profile's
    target (or of ``model``) -> (prompts, inputs). A model with random weights has no tokenizer of its own:
    SmolLM2's renders the prompts."""
    prompts = load_prompts(source, category=category, num_prompts=num_prompts, per_category=per_category)
    tokenizer = load_tokenizer(tokenizer_path(profile, model))
    return prompts, apply_chat_template(tokenizer, prompts)


def greedy(max_tokens: int, temperature: float = 0.0, **kw):
    """SamplingParams for a lesson: greedy unless a temperature is given.

    Greedy runs also return the top two log-probabilities per token, so that a divergence from the
    baseline can be judged by the target's margin there (``speclab.measure.equality``).
    """
    SamplingParams = import_vllm().SamplingParams  # quietly: its import prints to the log

    if temperature == 0:
        kw.setdefault("logprobs", equality.TOP_LOGPROBS)
    return SamplingParams(temperature=temperature, max_tokens=max_tokens, **kw)


def _greedy_cell(check: equality.GreedyCheck | None) -> str:
    """'4/4 same', '3/4 same' (parted at near-ties only) or 'CHANGED' for a sweep table."""
    if check is None:
        return "-"
    return f"{check.identical}/{check.num_prompts} same" if check.ok else "CHANGED"


def table(results: list[BenchResult]) -> str:
    """A plain-text table of a sweep: one row per speculative config, the shared baseline first."""
    rows = []
    if results and results[0].baseline is not None:
        b = results[0].baseline
        rows.append(("baseline", "-", "-", f"{b.output_tokens_per_s:.1f}", "1.00", "-"))
    for r in results:
        c = r.speculative.counters
        rows.append((r.method, str(r.k), f"{c.acceptance_length:.2f}", f"{r.speculative.output_tokens_per_s:.1f}",
                     f"{r.speedup:.2f}" if r.speedup else "-",
                     _greedy_cell(r.greedy_check)))
    head = ("method", "k", "acc.len", "tok/s", "speedup", "greedy")
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*head)] + [fmt.format(*row) for row in rows])


def warm_up_request(groups: dict[str, tuple[list, object]], names: list[str]) -> tuple[object, object]:
    """(sampling params, prompt) of the named group that generates longest: ``warm_up``'s request for an
    engine that will time those groups."""
    longest = max(names, key=lambda name: getattr(groups[name][1], "max_tokens", 0) or 0)
    return groups[longest][1], groups[longest][0][0]


def median_run(runs: list[RunStats]) -> RunStats:
    """The run of median time among timings of the same requests (the slower middle of an even count):
    a disturbance that slowed one of them, or a lucky quiet moment, does not become the figure."""
    if not runs:
        raise ValueError("median_run needs at least one run")
    return sorted(runs, key=lambda r: r.elapsed_s)[len(runs) // 2]


def grid(profile: Profile, runs: dict[str, dict | None], groups: dict[str, tuple[list, object]],
         *, only: dict[str, list[str]] | None = None, rounds: int = 1, log=None,
         **engine_overrides) -> dict[str, dict[str, RunStats]]:
    """Measure every group (inputs, sampling params) on every config: one engine per config.

    Groups share an engine, so a temperature sweep or a per-category comparison costs one
    engine start per config, not one per cell. ``only`` names the groups a config's engine
    measures (default: all of them). With ``rounds`` > 1 the engine times its groups that many
    times, all groups in each round, and keeps each group's ``median_run``: a disturbance of a
    few seconds then spoils one round of a group, not its only timing. Returns result[label][group].
    """
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise configs.ConfigError(f"grid: rounds={rounds!r}: pass a whole number of timed rounds, 1 or more")
    only = only or {}
    for label, names in only.items():
        unknown = [n for n in names if n not in groups]
        if label not in runs or unknown or not names:
            raise configs.ConfigError(f"grid: 'only' names {label!r} -> {names!r}, but the runs are {list(runs)} "
                                      f"and the groups {list(groups)}: name a run and at least one of its groups")
    runs = checked_runs(profile, runs, **engine_overrides)
    out: dict[str, dict[str, RunStats]] = {}
    for label, config in runs.items():
        names = only.get(label, list(groups))
        log and log(f"{label} ...")
        with open_engine(profile, config, **engine_overrides) as llm:
            warm_up(llm, *warm_up_request(groups, names))
            timed = {name: [] for name in names}
            for _ in range(rounds):
                for name in names:
                    timed[name].append(measure(llm, *groups[name], label=f"{label}/{name}"))
            out[label] = {name: median_run(each) for name, each in timed.items()}
    return out


def by_category(profile: Profile, runs: dict[str, dict | None], prompts: list, inputs: list,
                sampling_params, *, log=None, **engine_overrides) -> dict[str, dict[str, RunStats]]:
    """``grid`` with one group per prompt category, so acceptance is attributed to its workload."""
    groups: dict[str, list] = {}
    for p, inp in zip(prompts, inputs):
        groups.setdefault(p.category, []).append(inp)
    return grid(profile, runs, {cat: (inp, sampling_params) for cat, inp in groups.items()}, log=log,
                **engine_overrides)


# Engines that run one after another each see their own moment of the machine. On an H100 one gpu-tiny prompt
# (96 tokens) takes about 0.2 s, and two recordings of lesson 08 with the same acceptance lengths (greedy) put
# EAGLE's summarisation speedup at 1.44x and 0.81x from a single timing per prompt. Three rounds, median kept,
# cost a GPU lesson seconds; on a CPU the engines take turns instead. A later round finds its prompt in vLLM's
# prefix cache, on every engine alike.
ONE_AFTER_ANOTHER_ROUNDS = 3


def rounds_for(runs: dict[str, dict | None]) -> tuple[int, str]:
    """How many rounds ``one_at_a_time`` times each prompt where its engines run one after another, and why.

    A method that drafts from earlier requests' answers (``configs.DRAFTS_FROM_EARLIER_REQUESTS``) would draft a
    second round of the same prompts from the first round's outputs: each request is then timed once, in the
    order given (lesson 14's point)."""
    remembering = sorted({c["method"] for c in runs.values()
                          if c and c.get("method") in configs.DRAFTS_FROM_EARLIER_REQUESTS})
    if remembering:
        return 1, f"each prompt timed once, in order: {', '.join(remembering)} drafts from earlier requests' answers"
    return ONE_AFTER_ANOTHER_ROUNDS, f"each prompt timed in {ONE_AFTER_ANOTHER_ROUNDS} rounds, its median kept"


def one_at_a_time(profile: Profile, runs: dict[str, dict | None], prompts: list, inputs: list,
                  sampling_params, *, log=None, **engine_overrides) -> dict[str, dict[str, list[RunStats]]]:
    """Every prompt measured alone (batch 1, a single user's request; Spec-Bench measures methods this way),
    one engine per config -> result[label][category]: one ``RunStats`` per prompt, in the set's order.

    Alone, each prompt's acceptance and speed are its own, so a category's figure comes with a spread.
    Where the engines fit side by side (``why_one_after_another``) they take turns, prompt by prompt
    (``taking_turns``), so that a change in the machine's load lands on every engine alike instead of on
    one engine's whole run. Elsewhere they run one after another, each timing the prompts in
    ``ONE_AFTER_ANOTHER_ROUNDS`` rounds and keeping each prompt's median (once, where a method drafts from
    earlier requests: ``rounds_for``), and ``untrusted`` catches a change that a ratio still cannot survive.
    """
    groups = {str(i): ([inp], sampling_params) for i, inp in enumerate(inputs)}
    why = why_one_after_another(profile, len(runs))
    if why:
        rounds, how = rounds_for(runs)
        log and log(f"engines one after another ({why}); {how}")
        flat = grid(profile, runs, groups, rounds=rounds, log=log, **engine_overrides)
    else:
        flat = taking_turns(profile, runs, groups, log=log, **engine_overrides)
    out: dict[str, dict[str, list[RunStats]]] = {}
    for label, cells in flat.items():
        for i, p in enumerate(prompts):
            out.setdefault(label, {}).setdefault(p.category, []).append(cells[str(i)])
    return out


# What one more open CPU engine of a small model costs in memory besides its KV cache: the weights, vLLM's
# buffers and, outside the caller's process, an engine core and a worker that import torch and vLLM.
CPU_ENGINE_OVERHEAD_GIB = 1.5


def why_one_after_another(profile: Profile, num_engines: int) -> str | None:
    """Why the engines of a comparison cannot be open together and take turns, or None where they can.

    Taking turns needs each request's own counters (vLLM releases after 0.27: with several engines in one
    process the engine counters mix), a CPU (a GPU engine claims most of the card for its KV cache) and the
    memory for every engine at once."""
    if profile.device != "cpu":
        return "a GPU engine claims most of the card's memory"
    if not has_per_request_spec_metrics():
        return "this vLLM has no per-request counters; releases after 0.27 have"
    import psutil

    kv_gib = float(os.environ.get("VLLM_CPU_KVCACHE_SPACE") or CPU_KVCACHE_GIB)
    need = num_engines * (kv_gib + CPU_ENGINE_OVERHEAD_GIB)
    have = psutil.virtual_memory().available / 2**30
    if need > have:
        return f"{num_engines} engines need about {need:.0f} GiB of memory at once, {have:.0f} GiB is free"
    return None


def taking_turns(profile: Profile, runs: dict[str, dict | None], groups: dict[str, tuple[list, object]],
                 *, log=None, **engine_overrides) -> dict[str, dict[str, RunStats]]:
    """``grid``'s measurement with every engine open at once: each group runs on every engine in turn, the
    first turn moving one engine on from group to group, so no engine always follows the same one.

    Timed runs of different engines are then seconds apart, not minutes: a process that competes for the
    machine for a while slows every engine alike, and the ratios stand. Counters come from each request
    (``per_request_spec_decode_metrics``), since the engines share the process's counters. Returns
    result[label][group]."""
    runs = checked_runs(profile, runs, **engine_overrides)
    labels = list(runs)
    log and log(f"{', '.join(labels)}: {len(labels)} engines open at once, each prompt runs on every one in turn")
    with contextlib.ExitStack() as stack:
        engines = {}
        for label, config in runs.items():
            per_request = {} if config is None else {"per_request_spec_decode_metrics": "summary"}
            engines[label] = stack.enter_context(open_engine(profile, config, **per_request, **engine_overrides))
            warm_up(engines[label], *warm_up_request(groups, list(groups)))
        measured: dict[str, dict[str, RunStats]] = {label: {} for label in labels}
        for i, (name, (inputs, sampling_params)) in enumerate(groups.items()):
            for label in labels[i % len(labels):] + labels[:i % len(labels)]:
                measured[label][name] = measure(engines[label], inputs, sampling_params, label=f"{label}/{name}")
    return {label: {name: measured[label][name] for name in groups} for label in labels}


def alone_and_together(profile: Profile, config: dict | None, inputs: list, sampling_params,
                       enforce_eager: bool | None = None, **engine_overrides) -> tuple[list[RunStats], RunStats]:
    """One fresh engine: every prompt alone, one after another (one record each), then all at once."""
    with open_engine(profile, config, enforce_eager=enforce_eager, **engine_overrides) as llm:
        warm_up(llm, sampling_params, inputs[0])
        alone = [measure(llm, [one], sampling_params) for one in inputs]
        together = measure(llm, inputs, sampling_params)
    return alone, together


def combine(runs: list[RunStats], label: str | None = None) -> RunStats:
    """Runs made one after another, as one run: tokens, seconds and counters add up and the outputs keep their
    order, so a category's prompts measured alone give one acceptance length and one speedup (total tokens
    over total time) and compare with the baseline's like a batch would."""
    if not runs:
        raise ValueError("combine needs at least one run")
    return RunStats(
        label=label or runs[0].label, num_prompts=sum(r.num_prompts for r in runs),
        output_tokens=sum(r.output_tokens for r in runs), elapsed_s=sum(r.elapsed_s for r in runs),
        counters=sum((r.counters for r in runs), SpecCounters()),
        ttft_s=[t for r in runs for t in r.ttft_s], tpot_s=[t for r in runs for t in r.tpot_s],
        token_ids=[ids for r in runs for ids in r.token_ids], texts=[t for r in runs for t in r.texts],
        margins=[m for r in runs for m in r.margins], engine_start_s=runs[0].engine_start_s)


def prompt_speedups(per_prompt: dict[str, dict[str, list[RunStats]]],
                    baseline: str = "baseline") -> dict[str, dict[str, list[float]]]:
    """result[label][category] (one run per prompt) -> each prompt's speedup against the baseline's same prompt."""
    base = per_prompt[baseline]
    return {label: {cat: [metrics.speedup(r.output_tokens_per_s, b.output_tokens_per_s)
                          for r, b in zip(runs, base[cat], strict=True)] for cat, runs in cats.items()}
            for label, cats in per_prompt.items() if label != baseline}


@dataclass(frozen=True)
class CategoryWinner:
    """The fastest method of a category, and on how many of its prompts it beat the baseline."""

    method: str
    speedup: float
    prompts_faster: int
    num_prompts: int

    def __str__(self) -> str:
        return (f"{self.method} {self.speedup:.2f}x (faster than the baseline on {self.prompts_faster} of "
                f"{self.num_prompts} prompts)")


def untrusted(per_prompt: dict[str, dict[str, list[RunStats]]],
              baseline: str = "baseline") -> dict[str, dict[str, str]]:
    """{method: {category: why}} for the category figures that cannot be right (``metrics.impossible_speedup``).

    The category's figure (its prompts' tokens over their time) is checked, not each prompt's: one short
    prompt timed alone moves by tens of percent on a quiet machine (a prompt where n-gram drafted nothing,
    acceptance length 1.00, measured 1.25x against a slow baseline run of it), and a category's total
    evens that out, while a machine busy for one engine's whole run still breaks the bound."""
    flagged: dict[str, dict[str, str]] = {}
    for label, cats in per_prompt.items():
        if label == baseline:
            continue
        for cat, runs in cats.items():
            run, ref = combine(runs), combine(per_prompt[baseline][cat])
            why = metrics.impossible_speedup(metrics.speedup(run.output_tokens_per_s, ref.output_tokens_per_s),
                                             run.counters.acceptance_length)
            if why:
                flagged.setdefault(label, {})[cat] = why
    return flagged


def category_winners(speedup: dict[str, dict[str, float]], prompt_speedup: dict[str, dict[str, list[float]]],
                     exclude: dict[str, dict[str, str]] | None = None) -> dict[str, CategoryWinner | None]:
    """speedup[method][category] -> per category the fastest method, or None where none beat the baseline
    (speculation there is pure cost). ``prompt_speedup`` gives each prompt's figure behind the category's;
    ``exclude`` ({method: {category: why}}, e.g. ``untrusted``) names figures that may not win."""
    exclude = exclude or {}
    categories = list(dict.fromkeys(c for cats in speedup.values() for c in cats))
    out: dict[str, CategoryWinner | None] = {}
    for cat in categories:
        candidates = [m for m in speedup if cat in speedup[m] and cat not in exclude.get(m, {})]
        method = max(candidates, key=lambda m: speedup[m][cat], default=None)
        if method is None or speedup[method][cat] <= 1.0:
            out[cat] = None
            continue
        each = prompt_speedup[method][cat]
        out[cat] = CategoryWinner(method, speedup[method][cat], sum(x > 1.0 for x in each), len(each))
    return out


def greedy_checks(results: dict[str, dict[str, RunStats]], label: str,
                  baseline: str = "baseline") -> dict[str, equality.GreedyCheck]:
    """result[label][group] against the baseline's same group -> one ``GreedyCheck`` per group."""
    return {group: equality.check_runs(results[baseline][group], run) for group, run in results[label].items()}


def speedups(results: dict[str, dict[str, RunStats]], baseline: str = "baseline") -> dict[str, dict[str, float]]:
    """result[label][category] -> speedup against the baseline's same category."""
    base = results[baseline]
    return {label: {cat: metrics.speedup(r.output_tokens_per_s, base[cat].output_tokens_per_s)
                    for cat, r in cats.items()}
            for label, cats in results.items() if label != baseline}
