from speclab.algorithms import memory
from speclab.measure import synthetic


def _gpu_c():
    """c fitted to the stored GPU sweep at batch 1 (each point's fastest engine), as the lesson prints it."""
    sweep = synthetic.load_reference("speedup_surface")
    return synthetic.step_costs(synthetic.fastest_engines(sweep))[1].cost_ratio


CONCLUSIONS = [
    # (results file stem, exact sentence fragment that appears verbatim in the lesson's markdown, predicate)
    ("01_how_it_works", "Greedy speculation reproduces the plain greedy text for every k",
     lambda r: all(g["identical"] for g in r["greedy"])),
    ("01_how_it_works", "needs fewer target passes as k grows",
     lambda r: all(a["k"] < b["k"] and a["target_passes"] > b["target_passes"]
                   for a, b in zip(r["greedy"], r["greedy"][1:]))),
    ("01_how_it_works", "the speculative bars sit on the exact ones as closely as plain sampling does",
     lambda r: r["distribution_checks"]["speculative sampling"]["p_value"] > 0.05
     and r["distribution_checks"]["speculative sampling"]["tv"] < 2 * r["distribution_checks"]["plain target sampling"]["tv"]),
    ("01_how_it_works", "resampling from q after a rejection misses by far more than sampling noise",
     lambda r: r["distribution_checks"]["resample from q (wrong)"]["tv"] > 5 * r["distribution_checks"]["speculative sampling"]["tv"]
     and r["distribution_checks"]["resample from q (wrong)"]["p_value"] < 1e-6),
    ("01_how_it_works", "The per-position rates fall with position",
     lambda r: all(a > b for a, b in zip(r["toy_run"]["per_position_rates"], r["toy_run"]["per_position_rates"][1:]))),
    ("01_how_it_works", "puts the formula close to the measured acceptance length",
     lambda r: abs(r["predicted_tokens_per_step"] - r["toy_run"]["acceptance_length"]) < 0.02 * r["toy_run"]["acceptance_length"]),
    ("01_how_it_works", "The draft acceptance rate comes out below $a$",
     lambda r: r["toy_run"]["draft_acceptance_rate"] < r["fitted_a"]),
    ("01_how_it_works", "In the speedup plot the best k shrinks as c grows",
     lambda r: all(a >= b for a, b in zip(list(r["best_k_by_cost"].values()), list(r["best_k_by_cost"].values())[1:]))
     and list(r["best_k_by_cost"].values())[0] > list(r["best_k_by_cost"].values())[-1]),
    # stored GPU sweep (data/gpu_reference/speedup_surface.json), not the lesson's own results
    ("01_how_it_works", "push the measured $c$ above the size ratio",
     lambda r: _gpu_c() > memory.cost_ratio("llama-3.2-1b", "llama-3.1-8b")),
]
