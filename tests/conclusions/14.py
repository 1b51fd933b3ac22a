CONCLUSIONS = [
    # (results file stem, exact sentence fragment that appears verbatim in the lesson's markdown, predicate)
    ("14_suffix_decoding", "suffix decoding's replay accepts far more in the again round than in the first",
     lambda r: r["replay_acceptance_length"]["suffix"]["again"] > 2 * r["replay_acceptance_length"]["suffix"]["first"]),
    ("14_suffix_decoding", "more than n-gram's in that round",
     lambda r: r["replay_acceptance_length"]["suffix"]["again"] > r["replay_acceptance_length"]["ngram"]["again"]),
    ("14_suffix_decoding", "N-gram accepts about as much on a repeat as the first time",
     lambda r: abs(r["replay_acceptance_length"]["ngram"]["again"] / r["replay_acceptance_length"]["ngram"]["first"] - 1)
     < 0.2),
    ("14_suffix_decoding", "n-gram's measured acceptance follows its replay, round by round",
     lambda r: all(abs(r["acceptance_length"]["ngram"][k] - r["replay_acceptance_length"]["ngram"][k]) < 0.15
                   for k in r["acceptance_length"]["ngram"])),
    ("14_suffix_decoding", "On the GPU reference, whose small model writes hundreds of tokens a second, n-gram ran below the baseline in every round",
     lambda r, profile: not profile.startswith("gpu") or all(s < 1 for s in r["speedup"]["ngram"].values())),
]
