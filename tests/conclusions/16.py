# Lesson 16 (which method when): the guide's conclusions, checked on each reference's own lesson results.
from statistics import median_high  # the upper middle, as lesson 16's median

from speclab import reference

COPYING = ("code", "rag", "summarisation")


def _kept(batched, alone):
    """Share of the one-request speedup (median category) that survives sending the prompts together."""
    return batched / median_high(alone.values())


def _keeps_more(r, profile):
    lookup = reference.results("02_ngram_prompt_lookup", profile)["speedup_code"]
    eagle = reference.results("04_eagle", profile)["speedup"]
    draft = reference.results("03_draft_model", profile)["speedup_all_prompts"]
    kept = {m: _kept(b, r["speedup"][m]) for m, b in (("ngram", lookup), ("eagle", eagle), ("draft_model", draft))}
    return kept["ngram"] > max(kept["eagle"], kept["draft_model"])


CONCLUSIONS = [
    ("08_workloads", "EAGLE pays in most categories on both references",
     lambda r: sum(v > 1.0 for v in r["speedup"]["eagle"].values()) > len(r["categories"]) / 2),
    ("08_workloads", "EAGLE wins maths, whose answers are new text",
     lambda r: max(r["speedup"], key=lambda m: r["speedup"][m]["maths"]) == "eagle"),
    ("08_workloads", "Prompt lookup accepts the most tokens per step where answers copy their prompt",
     lambda r: all(r["acceptance_length"]["ngram"][c] > max(v[c] for m, v in r["acceptance_length"].items() if m != "ngram")
                   for c in COPYING)),
    ("08_workloads", "prompt lookup keeps more of its one-request gain than the drafters that run a model", _keeps_more),
    ("12_speedup_surface", "the break-even acceptance rises with the batch",
     lambda r: all(r["break_even_a"]["1"][k] < r["break_even_a"]["64"][k] for k in r["break_even_a"]["1"])),
]
