# Lesson 06 (Medusa): conclusions its markdown states about measured results.
# Break-even: the plain formula speedup = L / (1 + k*c) pays only above L = 1 + k*c; the shipped heads'
# c from sizes is (8 blocks * 576^2 + 49,152 * 576) / 134.5 M parameters = 0.230 (data/drafters/medusa/config.json).
C_SIZES = (8 * 576 * 576 + 49152 * 576) / 134.5e6

CONCLUSIONS = [
    ("06_medusa", "Per-position acceptance falls steeply after position 1",
     lambda r: (r["per_position_rates"][1] < r["per_position_rates"][0] / 2
                and all(a >= b for a, b in zip(r["per_position_rates"], r["per_position_rates"][1:])))),
    ("06_medusa", "The acceptance length therefore stays below the break-even printed by the heads cell",
     lambda r: r["acceptance_length"] < 1 + r["heads"] * (r.get("cost_ratio_from_sizes") or C_SIZES)),
    ("06_medusa", "Medusa runs slower than the baseline on the CPU and on the GPU reference alike",
     lambda r: r["speedup"] < 1.0),
]
