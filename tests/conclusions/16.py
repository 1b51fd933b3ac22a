# Lesson 16 (which method when): the guide's conclusions, checked on each reference's own lesson results.
from statistics import median_high  # the upper middle, as lesson 16's median

from speclab.measure import reference

COPYING = ("code", "rag", "summarisation")


def _kept(batched, alone):
    """Share of the one-request speedup (median category) that survives sending the prompts together."""
    return batched / median_high(alone.values())


def _kept_shares(r, profile) -> dict[str, float]:
    lookup = reference.results("02_ngram_prompt_lookup", profile)["speedup_code"]
    eagle = reference.results("04_eagle", profile)["speedup"]
    draft = reference.results("03_draft_model", profile)["speedup_all_prompts"]
    return {m: _kept(b, r["speedup"][m]) for m, b in (("ngram", lookup), ("eagle", eagle), ("draft_model", draft))}


def _keeps_more(r, profile):
    kept = _kept_shares(r, profile)
    return profile.startswith("gpu") or kept["ngram"] > max(kept["eagle"], kept["draft_model"])


def _draft_model_keeps_least(r, profile):
    kept = _kept_shares(r, profile)
    return not profile.startswith("gpu") or (min(kept["ngram"], kept["eagle"]) >= 0.7 and kept["draft_model"] < 0.34)


CONCLUSIONS = [
    ("08_workloads", "the winner depends on the machine: on the CPU reference prompt lookup wins most categories, on "
                     "the GPU reference EAGLE does",
     lambda r, profile: sum(w == ("eagle" if profile.startswith("gpu") else "ngram") for w in r["winners"].values())
     > len(r["categories"]) / 2),
    ("08_workloads", "on new text, maths, EAGLE's head accepts the most",
     lambda r: max(r["acceptance_length"], key=lambda m: r["acceptance_length"][m]["maths"]) == "eagle"),
    ("08_workloads", "Prompt lookup accepts the most tokens per step where answers copy their prompt",
     lambda r: all(r["acceptance_length"]["ngram"][c] > max(v[c] for m, v in r["acceptance_length"].items() if m != "ngram")
                   for c in COPYING)),
    ("08_workloads", "on the CPU reference prompt lookup keeps more of its one-request gain than the drafters that "
                     "run a model", _keeps_more),
    ("08_workloads", "On the GPU, which has compute to spare at eight requests of a 135M model, n-gram and EAGLE keep "
                     "most of theirs, and the draft model, which runs k passes of a whole model, keeps under a third "
                     "of its own", _draft_model_keeps_least),
    ("12_speedup_surface", "the break-even acceptance rises with the batch",
     lambda r: all(r["break_even_a"]["1"][k] < r["break_even_a"]["64"][k] for k in r["break_even_a"]["1"])),
]
