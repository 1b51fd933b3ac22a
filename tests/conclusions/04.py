from statistics import median_high  # the upper middle, as lesson 16's median

from speclab.measure import reference

CONCLUSIONS = [
    ("04_eagle", "The head accepts fewer tokens at each later position",
     lambda r: all(a >= b for a, b in zip(r["per_position_rates"], r["per_position_rates"][1:]))),
    ("04_eagle", "The acceptance length stays below vLLM's reference values for the published Llama heads",
     lambda r: r["acceptance_length"] < min(r["reference_acceptance_length"].values())),
    ("04_eagle", "On the CPU reference the effective `c` sits far above the `c` from sizes",
     lambda r, profile: profile.startswith("gpu") or r["c_effective"] > 2 * r["c_from_sizes"]),
    ("04_eagle", "on the GPU the two land close",
     lambda r, profile: not profile.startswith("gpu") or abs(r["c_effective"] / r["c_from_sizes"] - 1) < 0.5),
    ("04_eagle", "on both references its speedup here sits below its median category in lesson 08",
     lambda r, profile: r["speedup"] < median_high(reference.results("08_workloads", profile)["speedup"]["eagle"].values())),
]
CONCLUSIONS += [
    ("04_eagle", "on a CPU far more than its parameters suggest",
     lambda r, profile: profile.startswith("gpu") or r["c_effective"] > 2 * r["c_from_sizes"]),
]
