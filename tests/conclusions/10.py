def _speedups(r, which=None):
    s = r["speedup_by_concurrency"] if which is None else r["speedup_by_concurrency"][which]
    return {int(c): x for c, x in s.items() if x is not None}


def _best_level(r):
    s = _speedups(r)
    return max(s, key=s.get)


def _drafts_at(r, level):
    return next((e[2] for e in r["schedule"] if e[0] <= level <= e[1]), r["schedule"][-1][2])


def _first_level_without_drafts(r):
    return next((c for c in r["levels"] if _drafts_at(r, c) == 0), None)


CONCLUSIONS = [
    ("10_serving_and_monitoring", "Acceptance over the sweep stays well above 1",
     lambda r: r["acceptance_length"] > 1.5),
    ("10_serving_and_monitoring", "On the CPU reference speculation does best at one client",
     lambda r, profile: not profile.startswith("cpu") or _best_level(r) == min(r["levels"])),
    ("10_serving_and_monitoring", "falls behind as clients are added",
     lambda r, profile: not profile.startswith("cpu") or _speedups(r)[max(r["levels"])] < _speedups(r)[min(r["levels"])]),
    ("10_serving_and_monitoring", "does better with many clients than with one",
     lambda r, profile: not profile.startswith("gpu") or _speedups(r)[max(r["levels"])] > _speedups(r)[min(r["levels"])]),
    ("10_serving_and_monitoring", "speculation stops paying somewhere in the sweep",
     lambda r: r["break_even_concurrency"] is not None),
    ("10_dynamic_k", "at the first level where it drafts nothing it still runs below the baseline",
     lambda r: _first_level_without_drafts(r) is not None
     and _speedups(r, "dynamic")[_first_level_without_drafts(r)] < 1.0),
    ("10_serving_and_monitoring", "Every request got an answer", lambda r: r["failed_requests"] == 0),
    ("10_dynamic_k", "Every request got an answer", lambda r: r["failed_requests"] == 0),
]
