def _rows(r, method, batch):
    return sorted((x for x in r["block_drafting"]["rows"] if x["method"] == method and x["batch"] == batch),
                  key=lambda x: x["k"])


def _batches(r):
    return sorted({x["batch"] for x in r["block_drafting"]["rows"]})


CONCLUSIONS = [
    # (results file stem, exact sentence fragment that appears verbatim in the lesson's markdown, predicate)
    ("15_newer_methods", "both methods accept exactly the same tokens in every category",
     lambda r: r["lookup"]["accepted_tokens"]["ngram"] == r["lookup"]["accepted_tokens"]["ngram_gpu"]),
    ("15_newer_methods", "counts a draft in more steps, so its acceptance length reads lower",
     lambda r: all(r["lookup"]["drafts"]["ngram_gpu"][c] > r["lookup"]["drafts"]["ngram"][c]
                   and r["lookup"]["acceptance_length"]["ngram_gpu"][c] < r["lookup"]["acceptance_length"]["ngram"][c]
                   for c in r["lookup"]["categories"])),
    ("15_newer_methods", "was slower than `ngram` in every category",
     lambda r: all(r["lookup"]["speedup"]["ngram_gpu"][c] < r["lookup"]["speedup"]["ngram"][c]
                   for c in r["lookup"]["categories"])),
    ("15_newer_methods", "and at best level with the baseline",
     lambda r: max(r["lookup"]["speedup"]["ngram_gpu"].values()) < 1.05),
    ("15_newer_methods", "at batch 1 DFlash's step barely grows with k while EAGLE-3's grows with every drafted token",
     lambda r: (lambda d, e: max(d) / min(d) < 1.1 and all(a < b for a, b in zip(e, e[1:])))(
         [x["step_ms"] for x in _rows(r, "dflash", 1)], [x["step_ms"] for x in _rows(r, "eagle3", 1)])),
    ("15_newer_methods", "DFlash is at least as fast at every batch and k",
     lambda r: all(d["k"] == e["k"] and d["speedup"] >= e["speedup"]
                   for b in _batches(r) for d, e in zip(_rows(r, "dflash", b), _rows(r, "eagle3", b)))),
    ("15_newer_methods", "EAGLE-3's speedup peaks at a middle k",
     lambda r: all((lambda s: max(s) == max(s[1:-1]) and max(s) > s[0] and max(s) > s[-1])(
         [x["speedup"] for x in _rows(r, "eagle3", b)]) for b in _batches(r))),
]
