def _temps(r):
    return sorted(r["drafting_by_temperature"], key=float)


def _budgets(r):
    return sorted(r["tokens_per_pass_by_budget"], key=int)


def _vllm(r, label):
    return r["vllm"]["acceptance_length"][label]


CONCLUSIONS = [
    # (results file stem, exact sentence fragment that appears verbatim in the lesson's markdown, predicate)
    ("13_token_trees", "at temperature 0 greedy and sampled drafting give the same tokens per pass",
     lambda r: abs(r["drafting_by_temperature"]["0.0"]["greedy"] - r["drafting_by_temperature"]["0.0"]["sampled"]) < 1e-9),
    ("13_token_trees", "the temperature rises, sampled drafting pulls ahead",
     lambda r: (lambda gaps: all(g > 0 for g in gaps) and all(a <= b for a, b in zip(gaps, gaps[1:])))(
         [r["drafting_by_temperature"][t]["sampled"] - r["drafting_by_temperature"][t]["greedy"]
          for t in _temps(r) if float(t) > 0])),
    ("13_token_trees", "acceptance is highest at temperature 0 for both drafters",
     lambda r: r["vllm"]["temperatures"][0] == 0.0 and len(r["vllm"]["acceptance_length"]) == 4
     and all(v[0] == max(v) for v in r["vllm"]["acceptance_length"].values())),
    ("13_token_trees", "at T=1 probabilistic drafting keeps more for both drafters",
     lambda r: all(_vllm(r, f"{m} probabilistic")[r["vllm"]["temperatures"].index(1.0)]
                   > _vllm(r, f"{m} greedy")[r["vllm"]["temperatures"].index(1.0)]
                   for m in ("eagle3", "draft model"))),
    ("13_token_trees", "the greedy chain stops gaining after a few tokens of budget",
     lambda r: r["tokens_per_pass_by_budget"]["16"]["greedy chain"] - r["tokens_per_pass_by_budget"]["4"]["greedy chain"]
     < 0.05),
    ("13_token_trees", "the ranked trees keep gaining with the budget",
     lambda r: all(all(r["tokens_per_pass_by_budget"][a][s] < r["tokens_per_pass_by_budget"][b][s]
                       for a, b in zip(_budgets(r), _budgets(r)[1:])) for s in ("static tree", "dynamic tree"))),
    ("13_token_trees", "the static tree lands close to its prediction",
     lambda r: all(abs(r["tokens_per_pass_by_budget"][n]["static tree"] - r["static_tree_predicted"][n]) < 0.05
                   for n in _budgets(r))),
    ("13_token_trees", "the share of verified drafts accepted falls as the budget grows",
     lambda r: all(all(r["draft_acceptance_rate_by_budget"][a][s] >= r["draft_acceptance_rate_by_budget"][b][s]
                       for a, b in zip(_budgets(r), _budgets(r)[1:]))
                   for s in r["draft_acceptance_rate_by_budget"]["1"])),
    ("13_token_trees", "the exact rule's histograms match the target's",
     lambda r: all(v["p_value"] > 0.01 and v["tv"] < 0.1
                   for k, v in r["distribution_checks"].items() if "exact rule" in k)),
    ("13_token_trees", "Typical acceptance buys more tokens per pass and lands far from the target's distribution",
     lambda r: r["typical_acceptance"]["typical"] > r["typical_acceptance"]["exact"]
     and r["distribution_checks"]["dynamic tree, typical acceptance"]["tv"]
     > 5 * r["distribution_checks"]["dynamic tree, exact rule"]["tv"]),
]
