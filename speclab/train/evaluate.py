"""Acceptance of trained drafters, measured with vLLM on held-out prompts (greedy)."""

from __future__ import annotations

from pathlib import Path

from ..files import write_json
from ..measure import bench
from ..models import drafter_layouts, drafters
from ..models.profiles import DEFAULT_CPU_PROFILE, PROFILES, Profile
from ..vllm_layer import configs
from ..vllm_layer.envcheck import device_name
from .recipes import EVAL_K

# The small measurement each card keeps beside its full one: the same drafter and settings on the first
# held-out prompts, short enough for the test suite to repeat in the installed vLLM in a few minutes.
# Acceptance only: the timing of a few seconds of decoding would say nothing.
QUICK_CHECK = {"num_prompts": 8, "output_len": 32, "enforce_eager": True, "timed": False}


def evaluate(folders: dict, *, k: int = EVAL_K, prompts: str = "heldout", num_prompts: int | None = None,
             output_len: int = 128, enforce_eager: bool | None = None, write_card: bool = True, log=None,
             profile: Profile = PROFILES[DEFAULT_CPU_PROFILE],
             card_key: str = "acceptance", timed: bool = True) -> dict:
    """Acceptance with vLLM for ``{name: folder}``: one baseline, then each drafter (greedy).

    The method is the card's (or the name, for a folder without one; eagle3 for a head saved by
    speculators, which vLLM loads as saved). Writes the measurement into each folder's card.json
    (under ``card_key``: ``acceptance``, or ``quick_check`` at :data:`QUICK_CHECK`) and returns them by name;
    ``timed=False`` leaves the throughput and speedup out.
    """
    records, inputs = bench.prompt_inputs(profile, prompts, num_prompts=num_prompts)
    library = {n for n, f in folders.items() if drafter_layouts.is_speculators_folder(f)}  # loaded as saved
    methods = {n: "eagle3" if n in library else drafter_layouts.read_card(f).get("method", n)
               for n, f in folders.items()}
    models = {n: f if n in library else drafters.loadable(methods[n], f) for n, f in folders.items()}
    cfgs = [configs.build(methods[n], k=k, model=str(models[n])) for n in folders]
    results = bench.sweep(profile, cfgs, inputs, bench.greedy(output_len), dataset=f"data/prompts/{prompts}.jsonl",
                          enforce_eager=enforce_eager, log=log)
    out = {}
    for (name, folder), result in zip(folders.items(), results):
        s, b = result.speculative, result.baseline
        out[name] = {
            "method": methods[name], "k": k, "prompt_set": f"data/prompts/{prompts}.jsonl", "num_prompts": len(records),
            "output_len": output_len, "temperature": 0, "enforce_eager": enforce_eager,
            "acceptance_length": round(s.counters.acceptance_length, 4),
            "draft_acceptance_rate": round(s.counters.draft_acceptance_rate, 4),
            "per_position_rates": [round(r, 4) for r in s.counters.per_position_rates],
            "tokens_per_s": round(s.output_tokens_per_s, 2), "baseline_tokens_per_s": round(b.output_tokens_per_s, 2),
            "speedup": round(result.speedup, 3), "outputs_identical": result.outputs_identical,
            "greedy_ok": result.greedy_check.ok,
            "device": device_name(),
        }
        if not timed:
            for key in ("tokens_per_s", "baseline_tokens_per_s", "speedup"):
                del out[name][key]
        if write_card:
            card = drafter_layouts.read_card(folder)
            card[card_key] = out[name]
            write_json(Path(folder) / drafter_layouts.CARD, card)
    return out
