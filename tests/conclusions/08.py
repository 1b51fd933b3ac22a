# Lesson 08 (workloads): conclusions its markdown states about measured results.
# A predicate of two arguments gets the reference's profile too: some conclusions hold on one device only.


def _len(r, m, c):
    return r["acceptance_length"][m][c]


def _cats(r):
    return r["categories"]


def _wins(r, m):
    return sum(w == m for w in r["winners"].values())


def _others(r, c, m):
    return [_len(r, o, c) for o in r["acceptance_length"] if o != m]


CONCLUSIONS = [
    ("08_workloads", "n-gram's acceptance is longest everywhere but maths",
     lambda r: all(_len(r, "ngram", c) > max(_others(r, c, "ngram")) for c in _cats(r) if c != "maths")
     and _len(r, "eagle", "maths") > max(_others(r, "maths", "eagle"))),
    ("08_workloads", "in chat and translation n-gram's lead over EAGLE in acceptance length shrinks, or turns into a "
                     "loss, once you read the speedups",
     lambda r: all(1 < _len(r, "ngram", c) / _len(r, "eagle", c)
                   and r["speedup"]["ngram"][c] / r["speedup"]["eagle"][c] < _len(r, "ngram", c) / _len(r, "eagle", c)
                   for c in ("chat", "translation"))),
    # on the GPU the RAG race is within noise (n-gram 1.31x vs EAGLE 1.22x in one recording, 0.92x vs 0.91x in the next),
    # but it is the only category where n-gram's speedup comes within 10% of EAGLE's
    ("08_workloads", "RAG, whose answers quote the passage, is the one category where n-gram keeps up with EAGLE",
     lambda r, profile: not profile.startswith("gpu")
     or [c for c in _cats(r) if r["speedup"]["ngram"][c] >= 0.9 * r["speedup"]["eagle"][c]] == ["rag"]),
    ("08_workloads", "The draft model, paying a full model pass per draft, wins none",
     lambda r: "draft_model" not in r["winners"].values()),
    ("08_workloads", "on the CPU reference n-gram wins most categories and EAGLE's head wins none",
     lambda r, profile: profile.startswith("gpu") or (_wins(r, "ngram") > len(_cats(r)) / 2 and _wins(r, "eagle") == 0)),
    ("08_workloads", "on the GPU reference EAGLE wins most",
     lambda r, profile: not profile.startswith("gpu") or _wins(r, "eagle") > len(_cats(r)) / 2),
    ("08_workloads", "n-gram and the draft model are slower than the baseline in most categories",
     lambda r, profile: not profile.startswith("gpu") or all(sum(v < 1.0 for v in r["speedup"][m].values()) > len(_cats(r)) / 2
                                     for m in ("ngram", "draft_model"))),
    ("08_workloads", "one category's prompts spread widely",  # somewhere the fastest prompt gains 1.5x the slowest
     lambda r: any(max(p) >= 1.5 * min(p) for by_cat in r["prompt_speedups"].values() for p in by_cat.values())),
    ("08_workloads", "on the GPU reference some went the other way",
     lambda r, profile: not profile.startswith("gpu")
     or any(min(p) < 1.0 < max(p) for by_cat in r["prompt_speedups"].values() for p in by_cat.values())),
]
