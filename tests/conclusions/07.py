# Lesson 07 (tuning k and temperature): conclusions its markdown states about measured results.
KS = [1, 2, 3, 5]


def _length(r, k):
    return r[f"acceptance_length_k{k}"]


def _caution(verdict):  # theory.rule_of_thumb: "raise k" < "keep k" < "lower k or use a better drafter"
    return 0 if verdict.startswith("raise") else 1 if verdict.startswith("keep") else 2


def _iid(a, k):  # theory.expected_tokens_per_step
    return (1 - a ** (k + 1)) / (1 - a)


CONCLUSIONS = [
    ("07_tuning", "Acceptance length grows with k, by less for each added draft token",
     lambda r: all(
         0 < (_length(r, k2) - _length(r, k1)) / (k2 - k1) < (_length(r, k1) - _length(r, k0)) / (k1 - k0)
         for k0, k1, k2 in zip(KS, KS[1:], KS[2:]))),
    ("07_tuning", "the i.i.d. prediction from the fitted a overshoots at the largest k",
     lambda r: _iid(r["fitted_a"], KS[-1]) > _length(r, KS[-1])),
    ("07_tuning", "from the smallest k to the largest it grows far less than the acceptance length, or falls",
     lambda r: r[f"speedup_k{max(KS)}"] / r[f"speedup_k{min(KS)}"]
     < 0.85 * _length(r, max(KS)) / _length(r, min(KS))),
    ("07_tuning", "the effective c printed beside each k is large",  # c = (length / speedup - 1) / k, cell c06
     lambda r: all((_length(r, k) / r[f"speedup_k{k}"] - 1) / k > 0.3 for k in KS)),
    ("07_tuning", "the speedups stay near or below 1x",
     lambda r: max(r[f"speedup_k{k}"] for k in KS) < 1.2),
    ("07_tuning", "The rule of thumb says \"raise k\" at k=1 and grows more cautious as k rises",
     lambda r: r["rule_of_thumb"]["1"] == "raise k" and r["rule_of_thumb"][str(max(KS))] != "raise k"
     and all(_caution(r["rule_of_thumb"][str(a)]) <= _caution(r["rule_of_thumb"][str(b)]) for a, b in zip(KS, KS[1:]))),
    ("07_tuning", "Along the temperature axis acceptance shortens as T rises",
     lambda r: r["acceptance_length_T0.0"] > r["acceptance_length_T0.5"] > r["acceptance_length_T1.0"]),
]
