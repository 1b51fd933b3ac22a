"""The ``gpu-synthetic`` profile: real GPU timings, acceptance imposed by hand.

A GPU machine without network cannot fetch Llama weights, yet the time a speculative step
takes depends on the model's shape, not on its weights. So speclab hands vLLM a folder that
holds only a published ``config.json`` (``data/shapes/<name>``), loads it with random weights
(``load_format="dummy"``), feeds prompts as token ids (there is no tokenizer), and tells
vLLM's rejection sampler to accept draft tokens at rates we choose
(``rejection_sample_method="synthetic"``). Timings are real; acceptance is not measured but
imposed, and every result this module writes says so (``IMPOSED``).

The stored GPU results (``data/gpu_reference/*.json``, written by ``python -m
speclab.measure.gpu_sweep``) are read back with :func:`load_reference`, so that a notebook on a
laptop shows what the same lesson gives on an H200. Lesson 12 writes the step-cost fit and its
leave-one-out check out in its own cells (tests/test_lesson12_definitions.py holds them to
:func:`step_costs` and :func:`speedup_table`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from ..algorithms import theory
from ..errors import SpeclabError
from ..files import REPO_ROOT
from ..models.shapes import shape_config, shape_dir
from ..vllm_layer import configs
from ..vllm_layer.logs import import_vllm
from ..vllm_layer.vllm_features import SYNTHETIC_FIELDS, speculative_config_fields  # noqa: F401  (lessons read them here)
from ..vllm_layer.vllm_features import require_synthetic_acceptance as require_support  # noqa: F401
from ..vllm_layer.vllm_features import synthetic_acceptance_support as support  # noqa: F401

IMPOSED = "acceptance imposed by hand (vLLM synthetic rejection sampling, random weights); timings measured"
REFERENCE_DIR = REPO_ROOT / "data" / "gpu_reference"
# the shape each method drafts with when the caller names none (the target is llama-3.1-8b)
DEFAULT_DRAFTS = {"draft_model": "shape:llama-3.2-1b", "eagle": "shape:eagle-llama3.1-8b",
                  "eagle3": "shape:eagle3-llama3.1-8b"}
# token ids drawn for prompts: clear of Llama-3's special tokens (128000+) and of byte tokens
PROMPT_TOKEN_RANGE = (1000, 120000)


def model_dir(ref: str) -> str:
    """``shape:<name>`` -> the folder holding only its config.json (what ``model=`` takes)."""
    return str(shape_dir(ref))


def engine_overrides() -> dict:
    """What ``vllm.LLM`` needs to run a shape folder: random weights, no tokenizer."""
    return {"load_format": "dummy", "skip_tokenizer_init": True}


def acceptance_rates(a: float, k: int) -> list[float]:
    """Per-position rates [a, a^2, ..., a^k]: entry i is P(first i+1 draft tokens accepted)."""
    if not 0.0 < a <= 1.0:
        raise SpeclabError(f"acceptance a must lie in (0, 1], got {a}: pass e.g. a=0.8")
    return theory.predicted_positions(a, k)


def config(method: str, k: int, a: float | None = None, acceptance_length: float | None = None,
           draft: str | None = None, check: bool = True, **options) -> dict:
    """A speculative config whose acceptance is imposed: rates [a, ..., a^k] or a mean length.

    ``draft`` is a ``shape:`` reference or a folder (default: the shape that suits ``method``).
    Extra ``options`` go to the method's builder (e.g. ``draft_tensor_parallel_size``).
    """
    if (a is None) == (acceptance_length is None):
        raise configs.ConfigError("give exactly one of a (per-token acceptance) or acceptance_length")
    if check:
        require_support()
    if method in configs.NEEDS_MODEL:
        ref = draft or DEFAULT_DRAFTS.get(method)
        if ref is None:
            raise configs.ConfigError(f"no default {method} shape for the Llama target: pass draft='shape:<name>'")
        options["model"] = model_dir(ref) if ref.startswith("shape:") else ref
        if method in ("eagle", "eagle3"):
            options.setdefault("target", None)  # a shape-made head: no published pairing to check
    cfg = configs.build(method, k, **options)
    cfg["rejection_sample_method"] = "synthetic"
    if a is not None:
        cfg["synthetic_acceptance_rates"] = acceptance_rates(a, k)
    else:
        if not 1.0 <= acceptance_length <= k + 1:
            raise configs.ConfigError(f"acceptance_length must lie in [1, {k + 1}] for k={k}, got {acceptance_length}")
        cfg["synthetic_acceptance_length"] = float(acceptance_length)
    return cfg


def imposed_length(cfg: dict) -> float:
    """The mean acceptance length a synthetic config asks for: 1 + sum of its per-position rates."""
    if "synthetic_acceptance_length" in cfg:
        return float(cfg["synthetic_acceptance_length"])
    return 1.0 + sum(cfg["synthetic_acceptance_rates"])


def token_prompts(num_prompts: int, length: int = 128, target: str = "shape:llama-3.1-8b", seed: int = 0) -> list[dict]:
    """Random token-id prompts (``{"prompt_token_ids": [...]}``): there is no tokenizer to render text."""
    vocab = shape_config(target).get("vocab_size", PROMPT_TOKEN_RANGE[1])
    lo, hi = PROMPT_TOKEN_RANGE[0], min(PROMPT_TOKEN_RANGE[1], vocab - 1)
    rng = random.Random(seed)
    return [{"prompt_token_ids": [rng.randrange(lo, hi) for _ in range(length)]} for _ in range(num_prompts)]


def sampling(output_len: int = 256):
    """Greedy, exactly ``output_len`` tokens per prompt (random weights may emit EOS early), no detokenizing."""
    SamplingParams = import_vllm().SamplingParams  # quietly: its import prints to the log

    return SamplingParams(temperature=0.0, max_tokens=output_len, ignore_eos=True, detokenize=False)


# ---------------------------------------------------------------- stored GPU results

def list_references() -> list[str]:
    """Names of the stored GPU result files (``data/gpu_reference/<name>.json``)."""
    return sorted(p.stem for p in REFERENCE_DIR.glob("*.json"))


def load_reference(name: str, directory: str | Path | None = None) -> dict:
    """A stored GPU result (hardware, versions, date, the runs): what a notebook shows without a GPU.

    ``directory`` reads a fresh sweep's output instead of the stored one.
    """
    folder = Path(directory) if directory else REFERENCE_DIR
    path = folder / f"{name.removesuffix('.json')}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.json"))) or "none"
        raise SpeclabError(f"no GPU reference {name!r} in {folder} (have: {known}): "
                           "run python -m speclab.measure.gpu_sweep on "
                           "a GPU")
    return json.loads(path.read_text())


def runs(reference: dict, **match) -> list[dict]:
    """The runs of a reference whose fields equal ``match`` (e.g. ``method="draft_model", batch=1``)."""
    return [r for r in reference["runs"] if all(r.get(key) == value for key, value in match.items())]


def describe(reference: dict) -> str:
    """One line: where and with what a reference was measured, and that acceptance was imposed."""
    env = reference.get("environment", {})
    gpus = env.get("gpus") or [{}]
    return (f"{len(gpus)} x {gpus[0].get('name', '?')}, vLLM {env.get('vllm')}, torch {env.get('torch')}, "
            f"{env.get('date', '?')[:10]}; {reference.get('note', IMPOSED)}")


# ---------------------------------------------------------------- the cost model against the stored runs

def with_speedups(runs: list[dict]) -> list[dict]:
    """Add each speculative row's speedup over the baseline at the same batch size and tensor parallelism."""
    base = {(r["batch"], r["tensor_parallel_size"]): r["tokens_per_s"] for r in runs if r["method"] == "baseline"}
    for r in runs:
        ref = base.get((r["batch"], r["tensor_parallel_size"]))
        r["speedup"] = round(r["tokens_per_s"] / ref, 5) if ref and r["method"] != "baseline" else None
    return runs


# The timings that describe a run's speed (a stored row's median, each engine's own in ``engines``);
# speclab.measure.gpu_sweep stores them with the engine's start time beside them.
RATE_TIMINGS = ("elapsed_s", "tokens_per_s", "step_ms")


def fastest_engines(reference: dict) -> dict:
    """The reference as its fastest fresh engine per point measured it (speedups recomputed).

    A stored timing is the median over fresh engines. Where engines of one config fall into a fast
    and a slow mode (vLLM 0.26's draft-model path at k >= 4 on an H200), the median is whichever mode
    two of three engines drew; the fastest engine is what the hardware does when the engine runs as
    designed, and the cost model describes that engine.
    """
    runs_ = []
    for r in reference["runs"]:
        row = dict(r)
        if r.get("engines"):
            best = max(r["engines"], key=lambda e: e["tokens_per_s"])
            row.update({key: best[key] for key in RATE_TIMINGS if key in best})
        runs_.append(row)
    return {**reference, "runs": with_speedups(runs_), "timing": "fastest of the fresh engines"}


def step_costs(reference: dict, method: str = "draft_model", tensor_parallel_size: int = 1,
               leave_out: str | None = None) -> dict[int, theory.StepCost]:
    """Per batch size, the cost model fitted to every ``method`` run but the one labelled ``leave_out``.

    Step time does not depend on a (the drafter proposes k tokens whatever becomes of them), so
    runs at every acceptance inform the same line.
    """
    costs = {}
    for batch in sorted({r["batch"] for r in reference["runs"]}):
        base = runs(reference, method="baseline", batch=batch, tensor_parallel_size=tensor_parallel_size)
        fit = [r for r in runs(reference, method=method, batch=batch, tensor_parallel_size=tensor_parallel_size)
               if r["label"] != leave_out]
        if base and len({r["k"] for r in fit}) >= 2:
            costs[batch] = theory.fit_step_cost([r["k"] for r in fit], [r["step_ms"] for r in fit], base[0]["step_ms"])
    return costs


def speedup_table(reference: dict, method: str = "draft_model", tensor_parallel_size: int = 1,
                  fit: dict | None = None) -> list[dict]:
    """Measured speedup beside two predictions made without that run (leave-one-out).

    For each run, the cost model is fitted to the other runs at its batch size (of ``fit``, default
    ``reference`` itself: e.g. fitted on the fastest engines, judged against the medians); the plain
    formula gets the same fit's most favourable ``c = t_draft / t_target`` and ignores its fixed cost.
    """
    rows = []
    for r in runs(reference, method=method, tensor_parallel_size=tensor_parallel_size):
        cost = step_costs(fit or reference, method, tensor_parallel_size, leave_out=r["label"]).get(r["batch"])
        if cost is None or r.get("speedup") is None:
            continue
        plain = theory.speedup(r["a"], r["k"], cost.cost_ratio)
        model = cost.speedup(r["a"], r["k"])
        rows.append({"a": r["a"], "k": r["k"], "batch": r["batch"], "measured": r["speedup"],
                     "plain": plain, "cost_model": model, "c": cost.cost_ratio,
                     "acceptance_length": r["acceptance_length"], "imposed_length": r["imposed_length"],
                     "plain_error": plain / r["speedup"] - 1.0, "model_error": model / r["speedup"] - 1.0})
    return sorted(rows, key=lambda row: (row["batch"], row["k"], row["a"]))


def within(rows: list[dict], key: str, tolerance: float = 0.10) -> float:
    """Share of rows whose ``key`` error ("model_error", "plain_error") is within ``tolerance``."""
    return sum(abs(r[key]) <= tolerance for r in rows) / len(rows) if rows else float("nan")


def format_table(rows: list[dict]) -> str:
    """The speedup table as text: a, k, batch -> measured, plain formula, cost model."""
    lines = [f"{'a':>4} {'k':>2} {'batch':>5} | {'measured':>8} {'plain':>6} {'(err)':>7} {'model':>6} {'(err)':>7}"]
    for r in rows:
        lines.append(f"{r['a']:>4} {r['k']:>2} {r['batch']:>5} | {r['measured']:8.2f} {r['plain']:6.2f} "
                     f"{r['plain_error']:+7.1%} {r['cost_model']:6.2f} {r['model_error']:+7.1%}")
    return "\n".join(lines)
