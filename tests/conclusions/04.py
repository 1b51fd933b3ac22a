CONCLUSIONS = [
    ("04_eagle", "The head accepts fewer tokens at each later position",
     lambda r: all(a >= b for a, b in zip(r["per_position_rates"], r["per_position_rates"][1:]))),
    ("04_eagle", "The acceptance length stays below vLLM's reference values for the published Llama heads",
     lambda r: r["acceptance_length"] < min(r["reference_acceptance_length"].values())),
    ("04_eagle", "The effective `c` sits above the `c` from sizes",
     lambda r: r["c_effective"] > r["c_from_sizes"]),
    ("04_eagle", "With the 8 prompts in one batch EAGLE does not beat the baseline on either reference",
     lambda r: r["speedup"] < 1.0),
]
CONCLUSIONS += [
    ("04_eagle", "a speculative step costs more than its parameters suggest",
     lambda r: r["c_effective"] > r["c_from_sizes"]),
]
