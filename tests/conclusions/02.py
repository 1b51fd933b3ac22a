def _by(r, prefix):
    return {key[len(prefix):]: v for key, v in r.items() if key.startswith(prefix)}


CONCLUSIONS = [
    # (results file stem, exact sentence fragment that appears verbatim in the lesson's markdown, predicate)
    ("02_ngram_prompt_lookup", "Lookup accepts the most on code",
     lambda r: max(_by(r, "acceptance_length_"), key=_by(r, "acceptance_length_").get) == "code"),
    ("02_ngram_prompt_lookup", "and the fewest on maths",
     lambda r: min(_by(r, "acceptance_length_"), key=_by(r, "acceptance_length_").get) == "maths"),
    ("02_ngram_prompt_lookup", "The replay counts exactly vLLM's drafts in every category",
     lambda r: r["replay_drafts_match_vllm"] is True),
    ("02_ngram_prompt_lookup", "either match the baseline or part at a near-tie, never at a clear margin",
     lambda r: r["greedy_ok"] is True),
    ("02_ngram_prompt_lookup", "Every category's speedup stays below its acceptance length",
     lambda r: all(s < _by(r, "acceptance_length_")[cat] for cat, s in _by(r, "speedup_").items())),
]


def _steps(name):
    from speclab.measure import step_time

    return step_time.stored()[name]


def _cost(name, k=3):
    from speclab.measure import step_time

    return step_time.cost_in_plain_steps(_steps(name), k)


def _before_any_draft(name, k=3):
    """The share of a k-step's extra time (over a plain step) that the no-draft path already pays."""
    b = _steps(name)["breakdown"]["batch 1"]
    k_step = next(r["step_ms"] for r in _steps(name)["rows"] if r["mode"] == "batch 1" and r["config"] == f"ngram k={k}")
    return (b["no_draft_step_ms"] - b["plain_step_ms"]) / (k_step - b["plain_step_ms"])


# the stored step-time measurements (data/step_time/), the same for every reference run
CONCLUSIONS += [
    ("02_ngram_prompt_lookup", "On the GPU with SmolLM2 an n-gram step costs nearly three plain steps",
     lambda r: 2.5 <= _cost("gpu-tiny") < 3.2),
    ("02_ngram_prompt_lookup", "most of that cost is there before any draft",
     lambda r: _before_any_draft("gpu-tiny") > 0.5),
    ("02_ngram_prompt_lookup", "a k=3 step costs under two plain steps",
     lambda r: _cost("gpu-llama8b-random") < 2.0),
    ("02_ngram_prompt_lookup", "so the acceptance lengths above would pay there",
     lambda r: min(_by(r, "acceptance_length_").values()) > _cost("gpu-llama8b-random")),
]
