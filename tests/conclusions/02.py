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
